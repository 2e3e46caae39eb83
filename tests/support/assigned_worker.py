"""A manual-assign consumer process for the handover tests: ``python -m tests.support.assigned_worker``.

Runs :class:`rebalance_advisor.client.AssignedConsumer` and appends one line per processed record,
``<unix time> <member> <epoch> <topic> <partition> <offset>``, to OUT before polling again — so
whatever it commits is already on file. The helper's log goes to OUT.log. SIGTERM: close and exit.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
import time

from rebalance_advisor.client import AssignedConsumer


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("bootstrap", "group", "member", "topic", "out"):
        parser.add_argument(name)
    parser.add_argument("--takeover-timeout", type=float, default=3.0)
    parser.add_argument("--commit-interval", type=float, default=0.3)
    args = parser.parse_args()
    logging.basicConfig(
        filename=args.out + ".log", level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s"
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    consumer = AssignedConsumer(
        {"bootstrap.servers": args.bootstrap, "auto.offset.reset": "earliest"},
        args.group,
        args.member,
        topic=args.topic,
        takeover_timeout=args.takeover_timeout,
        check_interval=0.1,
    )
    fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    next_commit = time.monotonic() + args.commit_interval
    try:
        while not stop.is_set():
            message = consumer.poll(0.1)
            if message is not None:
                line = f"{time.time():.6f} {args.member} {consumer.epoch} {message.topic()} {message.partition()} {message.offset()}\n"
                os.write(fd, line.encode())
            if time.monotonic() >= next_commit:
                consumer.commit()
                next_commit = time.monotonic() + args.commit_interval
    except Exception:
        logging.getLogger(__name__).exception("worker failed")
        raise
    finally:
        consumer.close()
        os.close(fd)
        logging.getLogger(__name__).info("closed")


if __name__ == "__main__":
    main()
