"""``rebalance-advisor dev kafka|airflow ...``: the local broker, and a local Airflow with the project's DAGs."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
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

    fetch = kafka_sub.add_parser(
        "fetch", help="download the broker and tools jars and build the broker plugin into the cache (once)"
    )
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
    _register_airflow(dev_sub)


def _register_airflow(dev_sub: argparse._SubParsersAction) -> None:
    from rebalance_advisor.devtools import airflow_stack

    airflow = dev_sub.add_parser(
        "airflow",
        help="start, stop, status of a local Airflow 3 with the project's DAGs, a broker and the demo load",
    )
    airflow_sub = airflow.add_subparsers(dest="airflow_command", metavar="ACTION", required=True)
    start = airflow_sub.add_parser(
        "start", help="bring it all up in the background; prints the URL and login"
    )
    start.add_argument("--port", type=int, default=airflow_stack.DEFAULT_API_PORT, help="Airflow UI/API port")
    start.add_argument("--host", default="127.0.0.1", help="address the UI/API binds to (default 127.0.0.1)")
    start.add_argument(
        "--kafka-port", type=int, default=airflow_stack.DEFAULT_KAFKA_PORT, help="local broker port"
    )
    start.add_argument("--postgres-port", type=int, default=airflow_stack.DEFAULT_POSTGRES_PORT,
                       help="port of the PostgreSQL holding Airflow's metadata")  # fmt: skip
    start.add_argument("--worker-log-port", type=int, default=airflow_stack.DEFAULT_WORKER_LOG_PORT,
                       help="log server port of the task workers")  # fmt: skip
    start.add_argument("--trigger-log-port", type=int, default=airflow_stack.DEFAULT_TRIGGER_LOG_PORT,
                       help="log server port of the triggerer")  # fmt: skip
    start.add_argument("--no-demo-load", action="store_true", help="do not load the demo workload")
    start.add_argument(
        "--live", action="store_true",
        help="also run the demo's live group (a producer at Zipf rates, 4 consumers of limited capacity on the "
        "broker plugin's assignor): rates, time lags and predicted catch-up on the pages; about 5 more processes",
    )  # fmt: skip
    start.add_argument("--timeout", type=float, default=airflow_stack.START_TIMEOUT_S, help="seconds to wait")
    start.set_defaults(func=_airflow_start)
    airflow_sub.add_parser("stop", help="stop everything start started").set_defaults(func=_airflow_stop)
    airflow_sub.add_parser("status", help="what runs now").set_defaults(func=_airflow_status)


def _fetch(args: argparse.Namespace) -> int:
    from rebalance_advisor.adapters import kafka_jars

    print(kafka_jars.fetch_jars(quiet=False))
    print(kafka_jars.broker_plugin_jar(quiet=False))
    return 0


def _start(args: argparse.Namespace) -> int:
    from rebalance_advisor.devtools import local_kafka

    info = local_kafka.start(args.state_dir, port=args.port, timeout=args.timeout)
    print(f"broker running: {info.bootstrap_servers} (pid {info.pid}, data in {info.state_dir})")
    return 0


def _stop(args: argparse.Namespace) -> int:
    from rebalance_advisor.devtools import local_kafka

    print("broker stopped" if local_kafka.stop(args.state_dir) else "no broker was running")
    return 0


def _status(args: argparse.Namespace) -> int:
    from rebalance_advisor.devtools import local_kafka

    info = local_kafka.status(args.state_dir)
    if not info:
        print("no broker running")
        return 3
    print(f"broker running: {info.bootstrap_servers} (pid {info.pid})")
    return 0


def _consumer_groups(args: argparse.Namespace) -> int:
    from rebalance_advisor.devtools import local_kafka
    from rebalance_advisor.errors import AdvisorError

    bootstrap = args.bootstrap_server
    if not bootstrap:
        info = local_kafka.status(args.state_dir)
        if not info:
            raise AdvisorError("no local broker running: start one or pass --bootstrap-server HOST:PORT")
        bootstrap = info.bootstrap_servers
    tool_args = [a for a in args.tool_args if a != "--"] or ["--describe", "--all-groups"]
    return subprocess.run(
        local_kafka.consumer_groups_command(bootstrap, *tool_args), stdout=sys.stdout
    ).returncode


def _airflow_start(args: argparse.Namespace) -> int:
    from rebalance_advisor.devtools import airflow_stack

    ports = airflow_stack.StackPorts(
        args.port, args.kafka_port, args.worker_log_port, args.trigger_log_port, args.postgres_port
    )
    for name, port in vars(ports).items():
        if not 0 < port < 65536:
            raise airflow_stack.StackError(f"the {name} port must be between 1 and 65535, got {port}")
    report = airflow_stack.start(
        ports,
        host=args.host,
        timeout=args.timeout,
        workload=not args.no_demo_load,
        echo=lambda text: print(text, flush=True),
        live=args.live and not args.no_demo_load,
    )
    print(f"""
Airflow is running: {report.url}  (UI after {report.ui_ready_s:.1f} s, DAGs unpaused after {report.dags_unpaused_s:.1f} s)
  login:       {report.user} / {report.password}  (from {report.password_file})
  kafka:       {report.bootstrap_servers}  (connection kafka_default)
  plan db:     {report.db_url}  (connection rebalance_advisor_db; the CLI's default)
  metadata:    {report.metadata_url}  (Airflow's own database)
  AIRFLOW_HOME {report.airflow_home}
  the airflow CLI on this stack: source {report.env_file}; airflow dags list""")  # fmt: skip
    print("  the snapshot DAG runs now, then on its schedule; each snapshot triggers the advisor DAG")
    print("stop it with: rebalance-advisor dev airflow stop")
    return 0


def _airflow_stop(args: argparse.Namespace) -> int:
    from rebalance_advisor.devtools import airflow_stack

    began = time.monotonic()
    stopped = airflow_stack.stop(echo=lambda text: print(text, flush=True))
    print(f"stopped in {time.monotonic() - began:.1f} s" if stopped else "nothing was running")
    return 0


def _airflow_status(args: argparse.Namespace) -> int:
    from rebalance_advisor.devtools import airflow_stack

    now = airflow_stack.status()
    if now.url is None:
        print(
            "the local Airflow stack is not running"
            + (f"; a broker runs at {now.broker}" if now.broker else "")
        )
        return 3
    print(f"Airflow {now.url}: API {'answers' if now.api_healthy else 'does not answer'}")
    for name, part in (now.health or {}).items():
        if isinstance(part, dict) and "status" in part:
            print(f"  {name}: {part['status'] or 'never started'}")
    for name in now.running:
        print(f"  running: {name}")
    for name in now.stopped:
        print(f"  NOT running: {name}")
    print(f"  kafka: {now.broker or 'NOT running'}")
    print(f"  metadata postgres: {now.postgres or 'NOT running'}")
    if not now.healthy:
        print("unhealthy: " + ", ".join(now.unhealthy_parts + now.stopped or ("see above",)))
    return 0 if now.healthy else 3
