"""A manual-assign consumer process for the handover tests: ``python -m tests.support.assigned_worker``.

Runs :class:`rebalance_advisor_client.AssignedConsumer` and appends one line per processed record,
``<unix time> <member> <instance> <epoch> <topic> <partition> <offset> <producer id> <producer epoch>``
(``-`` for no producer), to OUT before polling again, so whatever it commits is already on file.
With ``--output-topic`` (fenced mode) it also sends ``<partition>:<offset>`` there through the
helper's transaction. ``--self-pause P``: with probability P it stops itself (SIGSTOP) right after
reading marks, after fencing or before committing a transaction, i.e. between a read and the write
that depends on it; the torture nemesis finds it stopped and continues it later. SIGUSR2 (or
``--die-in-transaction-after N`` processed records) arms a kill: the process SIGKILLs itself at its
next ``commit_transaction``, after ``send_offsets_to_transaction`` put offsets into the open
transaction (a member dead with a transaction open). The helper's log goes to OUT.log with unix
timestamps. SIGTERM: close (commit and release) and exit.
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import random
import signal
import threading
import time

from rebalance_advisor_client import AssignedConsumer, ClientError, fencing
from rebalance_advisor_client import consumer as consumer_module

#: cleared by SIGTERM: a worker that is shutting down no longer stops itself
_PAUSES_ON = threading.Event()
#: set by SIGUSR2: die (SIGKILL) at the next commit_transaction, with offsets sent and not committed
_DIE_IN_TRANSACTION = threading.Event()


def _arm_kills_in_transactions() -> None:
    """Wrap the transactional calls so that an armed worker dies between sending its offsets and
    committing the transaction: the broker keeps that transaction open until the next owner fences
    it, or until transaction.timeout.ms."""
    bounded = fencing.PartitionTransaction._bounded

    def maybe_die(self, call, *args):
        armed = _DIE_IN_TRANSACTION.is_set() and self.committing and "._probe." not in self.transactional_id
        if armed and getattr(call, "__name__", "") == "commit_transaction":
            logging.getLogger(__name__).info("dying in a transaction of %s", self.transactional_id)
            logging.shutdown()
            os.kill(os.getpid(), signal.SIGKILL)
        return bounded(self, call, *args)

    fencing.PartitionTransaction._bounded = maybe_die
    signal.signal(signal.SIGUSR2, lambda *_: _DIE_IN_TRANSACTION.set())


def _aim_pauses(probability: float, first: int = 0, at: str | None = None) -> None:
    """Wrap the helper's read-then-write points so the process sometimes stops itself there.

    ``first``: the ``first``-th pass through any of them stops for sure (so that a short run has
    aimed pauses even when a loaded machine makes those points rare); after that, by probability.
    ``at``: the first pass through that point (e.g. "after fencing") stops for sure.
    """
    _PAUSES_ON.set()
    passes = [0]
    aimed = [at]

    def maybe_stop(where: str) -> None:
        passes[0] += 1
        sure = passes[0] == first or where == aimed[0]
        if where == aimed[0]:
            aimed[0] = None
        if _PAUSES_ON.is_set() and (sure or random.random() < probability):
            logging.getLogger(__name__).info("self-pause %s", where)
            os.kill(os.getpid(), signal.SIGSTOP)

    read_marks = consumer_module.AssignedConsumer._read_marks
    fence = fencing.PartitionTransaction.fence
    commit = fencing.PartitionTransaction.commit

    def read_then_pause(self, tps, *args, **kwargs):
        result = read_marks(self, tps, *args, **kwargs)
        maybe_stop("after reading marks")
        return result

    def fence_then_pause(self, *args):
        result = fence(self, *args)
        if "._probe." not in self.transactional_id:  # the start probe fences nobody's partition
            maybe_stop("after fencing")
        return result

    def pause_then_commit(self, offsets, metadata):
        maybe_stop("before committing a transaction")
        return commit(self, offsets, metadata)

    consumer_module.AssignedConsumer._read_marks = read_then_pause
    fencing.PartitionTransaction.fence = fence_then_pause
    fencing.PartitionTransaction.commit = pause_then_commit


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("bootstrap", "group", "member", "topic", "out"):
        parser.add_argument(name)
    parser.add_argument("--takeover-timeout", type=float, default=3.0)
    parser.add_argument("--commit-interval", type=float, default=0.3)
    parser.add_argument("--unfenced", action="store_true")
    parser.add_argument("--output-topic")
    parser.add_argument("--self-pause", type=float, default=0.0)
    parser.add_argument("--first-self-pause", type=int, default=0)
    parser.add_argument(
        "--pause-at", choices=["after reading marks", "after fencing", "before committing a transaction"]
    )
    parser.add_argument("--ready-timeout", type=float, default=30.0)
    parser.add_argument("--request-timeout", type=float, default=5.0)
    parser.add_argument(
        "--transaction-timeout", type=float, help="seconds (default: the helper's own default, 60)"
    )
    parser.add_argument("--die-in-transaction-after", type=int, default=0, help="records (0: never)")
    args = parser.parse_args()
    logging.basicConfig(
        filename=args.out + ".log", level=logging.INFO, format="%(created).6f %(levelname)s %(message)s"
    )
    if args.self_pause or args.pause_at:
        _aim_pauses(args.self_pause, args.first_self_pause, args.pause_at)
    _arm_kills_in_transactions()
    # SIGUSR1: every thread's stack to OUT.stacks (the harness asks before it kills a hung worker)
    stacks = open(args.out + ".stacks", "w")  # noqa: SIM115 - open for the process's lifetime
    faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
    stop = threading.Event()

    def on_term(*_: object) -> None:
        _PAUSES_ON.clear()
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
    consumer = AssignedConsumer(
        {"bootstrap.servers": args.bootstrap, "auto.offset.reset": "earliest"},
        args.group,
        args.member,
        topic=args.topic,
        fenced=not args.unfenced,
        takeover_timeout=args.takeover_timeout,
        check_interval=0.1,
        request_timeout=args.request_timeout,
        ready_timeout=args.ready_timeout,
        **({"transaction_timeout": args.transaction_timeout} if args.transaction_timeout else {}),
    )
    processed = 0
    fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    next_commit = time.monotonic() + args.commit_interval
    try:
        while not stop.is_set():
            message = consumer.poll(0.1)
            if message is not None:
                try:
                    token = consumer.fencing_token(message)
                    if args.output_topic:
                        value = f"{message.partition()}:{message.offset()}".encode()
                        consumer.produce(message, args.output_topic, value)
                except ClientError as error:  # lost meanwhile: the new owner redoes it
                    logging.getLogger(__name__).warning("skipping output: %s", error)
                    continue
                pid = "-" if token.producer_id is None else str(token.producer_id)
                pe = "-" if token.producer_epoch is None else str(token.producer_epoch)
                line = (
                    f"{time.time():.6f} {args.member} {consumer.instance} {consumer.epoch} "
                    f"{message.topic()} {message.partition()} {message.offset()} {pid} {pe}\n"
                )
                os.write(fd, line.encode())
                processed += 1
                if processed == args.die_in_transaction_after:
                    _DIE_IN_TRANSACTION.set()
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
