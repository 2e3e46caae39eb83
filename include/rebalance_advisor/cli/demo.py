"""``rebalance-advisor demo-load`` and ``rebalance-advisor demo`` (what ``make demo`` runs)."""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    load = subparsers.add_parser(
        "demo-load", help="put known, skewed lag on a broker with real consumers (the demo workload)"
    )
    load.add_argument(
        "--bootstrap-servers",
        default=None,
        help="broker to load (default: $KAFKA_BOOTSTRAP_SERVERS, else the running local broker)",
    )
    load.add_argument(
        "--hold",
        type=float,
        default=0.0,
        help="keep the live members for SECONDS after the groups are stable (-1: until Ctrl-C)",
    )
    load.add_argument(
        "--reset", action="store_true",
        help="first delete the demo's topics and groups left by an earlier load (a shared cluster)",
    )  # fmt: skip
    load.add_argument(
        "--live", action="store_true",
        help="also run the live group: a producer at Zipf rates and consumers of limited capacity",
    )  # fmt: skip
    load.set_defaults(func=_demo_load)

    demo = subparsers.add_parser(
        "demo",
        help="the main job on embedded defaults: local broker, demo workload, snapshot and advisor DAGs",
    )
    demo.set_defaults(func=_demo)


def resolve_bootstrap(explicit: str | None) -> str:
    """Explicit servers, else ``KAFKA_BOOTSTRAP_SERVERS``, else the running local broker."""
    from rebalance_advisor.devtools import local_kafka
    from rebalance_advisor.errors import AdvisorError
    from rebalance_advisor.settings import bootstrap_servers_from_env

    if explicit:
        return explicit
    if env := bootstrap_servers_from_env():
        return env
    if info := local_kafka.status():
        return info.bootstrap_servers
    raise AdvisorError(
        "no broker: pass --bootstrap-servers, set KAFKA_BOOTSTRAP_SERVERS, "
        "or start one with `rebalance-advisor dev kafka start`"
    )


def _hold(seconds: float) -> None:
    if seconds < 0:
        print("members alive; Ctrl-C to stop them")
        while True:
            time.sleep(3600)
    time.sleep(seconds)


def _demo_load(args: argparse.Namespace) -> int:
    from rebalance_advisor.devtools import demo_workload

    bootstrap = resolve_bootstrap(args.bootstrap_servers)
    live = demo_workload.build_live_group() if args.live else None
    if live:
        print(
            f"{live.group_id:15} {len(live.produce_rates):3} partitions, {len(live.capacities)} members: {live.purpose}"
        )
    with demo_workload.demo_workload(bootstrap, reset=args.reset, live=live) as groups:
        for group in groups:
            partitions = sum(len(counts) for counts in group.produced.values())
            print(
                f"{group.group_id:15} {partitions:3} partitions, {len(group.members)} members: {group.purpose}"
            )
        with contextlib.suppress(KeyboardInterrupt):
            _hold(args.hold)
    print("demo members stopped")
    return 0


def _demo(args: argparse.Namespace) -> int:
    """Broker + demo workload (with the live group) -> snapshot DAG twice -> advisor DAG (in-process),
    then lag, plans and the live group's load before and after its plan."""
    from rebalance_advisor import store
    from rebalance_advisor.devtools import demo_workload, local_kafka
    from rebalance_advisor.devtools.demo_pipeline import run_demo_pipeline
    from rebalance_advisor.services import lag_report
    from rebalance_advisor.services.group_load_report import group_load_report
    from rebalance_advisor.settings import bootstrap_servers_from_env

    external = bootstrap_servers_from_env()
    live = demo_workload.build_live_group()
    with tempfile.TemporaryDirectory(prefix="rebalance-advisor-demo-") as tmp:
        work_dir = Path(tmp)
        db_url = f"sqlite:///{work_dir / 'advisor.db'}"
        if external:
            bootstrap = external
        else:
            print("starting a local Kafka broker ...", flush=True)
            bootstrap = local_kafka.start(work_dir / "kafka").bootstrap_servers
        try:
            print(f"loading the demo workload on {bootstrap} ...", flush=True)
            with demo_workload.demo_workload(bootstrap, reset=bool(external), live=live):
                print(
                    f"live traffic on {live.group_id}: {len(live.produce_rates)} partitions at Zipf rates "
                    f"({sum(live.produce_rates):.0f} records/s in all), {len(live.capacities)} consumers of "
                    f"{', '.join(f'{c:.0f}' for c in live.capacities)} records/s on the consumer protocol "
                    "with the broker's advised assignor, starting from range's split",
                    flush=True,
                )
                outcomes, applied = run_demo_pipeline(
                    bootstrap, db_url, work_dir / "airflow", apply_group=live.group_id
                )
            snapshot = store.load_snapshot(store.latest_snapshot_id(db_url), db_url)
            print("\nLag per partition (latest snapshot; the columns of kafka-consumer-groups --describe):")
            print(lag_report.format_lag_table(lag_report.rows(snapshot)))
            print("Advisor outcomes (max member lag before -> after, moves):")
            print(outcomes)
            print(f"\nThe live group ({live.purpose}):")
            print(group_load_report(live.group_id, db_url))
            print(
                f"\nThe live group's plan, approved and applied by the broker (no helper in its consumers):\n{applied}"
            )
        finally:
            if not external:
                local_kafka.stop(work_dir / "kafka")
                print("local broker stopped")
    return 0
