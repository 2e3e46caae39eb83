"""``rebalance-advisor dev kafka ...``: the local broker for the demo and the tests."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    dev = subparsers.add_parser("dev", help="developer tools: a real local Kafka broker")
    dev_sub = dev.add_subparsers(dest="dev_command", metavar="TOOL", required=True)
    kafka = dev_sub.add_parser("kafka", help="fetch, start, stop a single-node KRaft broker on 127.0.0.1")
    kafka_sub = kafka.add_subparsers(dest="kafka_command", metavar="ACTION", required=True)

    def with_state_dir(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        parser.add_argument(
            "--state-dir",
            type=Path,
            default=None,
            help="where the broker keeps its data, log and pid (default: $REBALANCE_ADVISOR_HOME/kafka)",
        )
        return parser

    fetch = kafka_sub.add_parser("fetch", help="download the broker and tools jars into the cache (once)")
    fetch.set_defaults(func=_fetch)

    start = with_state_dir(kafka_sub.add_parser("start", help="start the broker and wait until it answers"))
    start.add_argument("--port", type=int, default=None, help="listener port (default: a free one)")
    start.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for the broker")
    start.set_defaults(func=_start)

    stop = with_state_dir(kafka_sub.add_parser("stop", help="stop the broker, leaving no JVM behind"))
    stop.set_defaults(func=_stop)

    status = with_state_dir(kafka_sub.add_parser("status", help="print the running broker's address"))
    status.set_defaults(func=_status)

    groups = with_state_dir(
        kafka_sub.add_parser(
            "consumer-groups",
            help="Kafka's reference lag tool (kafka-consumer-groups); default args: --describe --all-groups",
        )
    )
    groups.add_argument("--bootstrap-server", default=None, help="default: the local broker")
    groups.add_argument("tool_args", nargs=argparse.REMAINDER, help="arguments passed to the tool")
    groups.set_defaults(func=_consumer_groups)


def _fetch(args: argparse.Namespace) -> int:
    from rebalance_advisor.devtools import local_kafka as localkafka

    print(localkafka.fetch_jars(quiet=False))
    return 0


def _start(args: argparse.Namespace) -> int:
    from rebalance_advisor.devtools import local_kafka as localkafka

    info = localkafka.start(args.state_dir, port=args.port, timeout=args.timeout)
    print(f"broker running: {info.bootstrap_servers} (pid {info.pid}, data in {info.state_dir})")
    return 0


def _stop(args: argparse.Namespace) -> int:
    from rebalance_advisor.devtools import local_kafka as localkafka

    print("broker stopped" if localkafka.stop(args.state_dir) else "no broker was running")
    return 0


def _status(args: argparse.Namespace) -> int:
    from rebalance_advisor.devtools import local_kafka as localkafka

    info = localkafka.status(args.state_dir)
    if not info:
        print("no broker running")
        return 3
    print(f"broker running: {info.bootstrap_servers} (pid {info.pid})")
    return 0


def _consumer_groups(args: argparse.Namespace) -> int:
    from rebalance_advisor.devtools import local_kafka as localkafka
    from rebalance_advisor.errors import AdvisorError

    bootstrap = args.bootstrap_server
    if not bootstrap:
        info = localkafka.status(args.state_dir)
        if not info:
            raise AdvisorError("no local broker running: start one or pass --bootstrap-server HOST:PORT")
        bootstrap = info.bootstrap_servers
    tool_args = [a for a in args.tool_args if a != "--"] or ["--describe", "--all-groups"]
    return subprocess.run(
        localkafka.consumer_groups_command(bootstrap, *tool_args), stdout=sys.stdout
    ).returncode
