"""``rebalance-advisor snapshot``, ``lag`` and ``db upgrade|prune``: take, read and keep snapshots."""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING

from rebalance_advisor.cli import DB_HELP

if TYPE_CHECKING:
    from rebalance_advisor.domain.snapshot_model import Snapshot
    from rebalance_advisor.services.lag_report import Row


def _retention_hours(name: str):
    """An argparse type for ``db prune``: hours > 0 (0 would prune everything) up to the parameter
    model's bound for ``name`` (argparse names the flag in its error line)."""
    from rebalance_advisor.domain.parameters import SnapshotParams, field_bounds

    most = field_bounds(SnapshotParams, name)["le"]

    def check(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and 0 < value <= most):
            raise argparse.ArgumentTypeError(f"must be a number of hours > 0 and <= {most:g}, not {text!r}")
        return value

    return check


def register(subparsers: argparse._SubParsersAction) -> None:
    """The ``snapshot``, ``lag`` and ``db`` commands."""
    _register_snapshot(subparsers)
    _register_lag(subparsers)
    _register_db(subparsers)


def _register_snapshot(subparsers: argparse._SubParsersAction) -> None:
    from rebalance_advisor.cli.options import add_options
    from rebalance_advisor.domain.parameters import SnapshotParams

    snap = subparsers.add_parser("snapshot", help="snapshot every consumer group's offsets into the database")
    snap.add_argument(
        "--bootstrap-servers",
        default=None,
        help="HOST:PORT[,...] (default: $KAFKA_BOOTSTRAP_SERVERS, else the local broker)",
    )
    snap.add_argument("--config", default=None, help="librdkafka .properties file (security settings etc.)")
    snap.add_argument("--db", default=None, help=DB_HELP)
    add_options(snap, SnapshotParams)
    snap.set_defaults(func=_snapshot)


def _register_lag(subparsers: argparse._SubParsersAction) -> None:
    lag = subparsers.add_parser(
        "lag", help="per-partition lag of a stored snapshot, in kafka-consumer-groups' columns"
    )
    lag.add_argument("--db", default=None, help=DB_HELP)
    lag.add_argument(
        "--snapshot", default="latest", metavar="ID|latest", help="which snapshot (default latest)"
    )
    lag.add_argument("--group", default=None, help="one group only (empty: no filter: all groups)")
    lag.add_argument(
        "--format",
        choices=("table", "tool", "json", "csv"),
        default="table",
        help="table: the tool's columns plus time lag, rates and flags; tool: exactly kafka-consumer-groups'",
    )
    lag.add_argument("--reset-policy", default=None, metavar="SPEC",
                     help="auto.offset.reset per group for POLICY-LAG, e.g. 'orders-.*=earliest,latest'")  # fmt: skip
    lag.set_defaults(func=_lag)


def _register_db(subparsers: argparse._SubParsersAction) -> None:
    from rebalance_advisor.domain.parameters import SnapshotParams

    dbp = subparsers.add_parser("db", help="the advisor database: schema migrations and retention")
    dbsub = dbp.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    up = dbsub.add_parser("upgrade", help="create or migrate the tables (Alembic, idempotent)")
    up.add_argument("--db", default=None, help="SQLAlchemy URL")
    up.set_defaults(func=_db_upgrade)
    pr = dbsub.add_parser("prune", help="delete snapshots and advisor history older than the retention")
    pr.add_argument("--db", default=None, help="SQLAlchemy URL")
    retention = SnapshotParams.model_fields["retention_hours"].default
    pr.add_argument("--retention-hours", type=_retention_hours("retention_hours"), default=retention,
                    help=f"keep this many hours (default {retention:g})")  # fmt: skip
    plan_retention = SnapshotParams.model_fields["plan_retention_hours"].default
    pr.add_argument("--plan-retention-hours", type=_retention_hours("plan_retention_hours"),
                    default=plan_retention,
                    help=f"keep advisor runs and their plans this many hours (default {plan_retention:g}); "
                    "standing plans (recommended, approved, published) and the newest run always stay")  # fmt: skip
    pr.set_defaults(func=_db_prune)


def _snapshot(args: argparse.Namespace) -> int:
    from rebalance_advisor import store
    from rebalance_advisor.adapters import kafka_snapshot
    from rebalance_advisor.cli.demo import resolve_bootstrap
    from rebalance_advisor.cli.options import params_from
    from rebalance_advisor.domain.parameters import SnapshotParams
    from rebalance_advisor.services.snapshot_service import take_and_store_snapshot

    params = params_from(args, SnapshotParams)
    config = kafka_snapshot.read_client_config(args.config) if args.config else {}
    config["bootstrap.servers"] = bootstrap = kafka_snapshot.clean_bootstrap(
        args.bootstrap_servers or config.get("bootstrap.servers") or resolve_bootstrap(None)
    )
    before = None
    try:
        # Another process's EXCLUSIVE lock keeps out the reads below: waited out in interruptible
        # steps, not in SQLite's busy wait, where Ctrl-C goes unseen until its timeout.
        store.wait_for_sqlite_writer(args.db, to_read=True)
        store.upgrade(args.db)  # a write: fail on a bad DB before touching Kafka; a no-op when current
        before = store.latest_snapshot_id(args.db) or 0
        taken = take_and_store_snapshot(params, config, args.db, prune=False).snapshot
        _report(taken)
    except KeyboardInterrupt:
        # Ctrl-C may land just after the commit: say what is stored, not just "interrupted".
        stored = None if before is None else store.stored_snapshot_after(before, bootstrap, args.db)
        if stored is None:
            print(
                "rebalance-advisor: interrupted before the snapshot was stored: nothing was stored",
                file=sys.stderr,
            )
        else:
            print(store.load_snapshot(stored, args.db).summary())
            print(
                f"rebalance-advisor: interrupted after snapshot {stored} was stored, as printed above",
                file=sys.stderr,
            )
        return 130
    return 0


def _report(taken) -> None:
    print(taken.summary())
    for error in taken.errors:
        where = " ".join(f"{k}={v}" for k, v in (("group", error.group_id), ("topic", error.topic)) if v)
        print(f"  {error.stage} {where}: {error.reason}", file=sys.stderr)


def _lag(args: argparse.Namespace) -> int:
    from rebalance_advisor import store
    from rebalance_advisor.domain.lag import ResetPolicy
    from rebalance_advisor.errors import AdvisorError
    from rebalance_advisor.services import lag_report
    from rebalance_advisor.store import db

    policy = ResetPolicy.parse(args.reset_policy)
    db.require_schema(args.db)
    snapshot_id = store.resolve_snapshot_id(args.snapshot, args.db)
    taken = store.load_snapshot(snapshot_id, args.db, groups=[args.group] if args.group else None)
    if args.group and taken.group(args.group) is None:
        raise AdvisorError(f"group {args.group!r} is not in snapshot {snapshot_id}")
    grouped = lag_report.rows(taken, args.group, policy)
    formatter = {
        "table": lag_report.format_lag_table,
        "tool": lag_report.format_tool,
        "json": lag_report.format_json,
        "csv": lag_report.format_csv,
    }
    sys.stdout.write(formatter[args.format](grouped))
    if args.format == "json":
        sys.stdout.write("\n")
    if args.format in ("table", "tool"):
        for note in _lag_notes(taken, grouped, args.format):
            print(f"\n{note}", file=sys.stderr)
    return 0


def _lag_notes(taken: Snapshot, grouped: dict[str, list[Row]], format_name: str) -> list[str]:
    """What the tool's layouts say on stderr beside the rows: the tool's own notes, then which LAG
    share groups and read_committed snapshots show, and why a table has no rates."""
    from rebalance_advisor.domain.snapshot_model import SHARE_GROUP_TYPE
    from rebalance_advisor.services import lag_report

    notes = lag_report.tool_notes(taken, grouped)
    shared = sorted(g.group_id for g in taken.groups if g.group_type == SHARE_GROUP_TYPE)
    if shared:
        notes.append(
            f"share groups (KIP-932; the broker assigns them, not planned): {', '.join(shared)}. "
            "Their CURRENT-OFFSET is the share-partition start offset and LAG the broker's own figure, "
            "as kafka-share-groups --describe prints them"
        )
    if taken.isolation_level == "read_committed":
        notes.append(
            f"snapshot {taken.snapshot_id} was taken read_committed: LAG is against the last stable offset"
        )
    if format_name == "table" and taken.rates is not None and taken.rates.note:
        notes.append(f"no rates in snapshot {taken.snapshot_id}: {taken.rates.note}")
    return notes


def _db_upgrade(args: argparse.Namespace) -> int:
    from rebalance_advisor.store import db

    revision = db.upgrade(args.db)
    print(f"database {db._safe(str(db.engine_for(args.db).url))} is at revision {revision}")
    return 0


def _db_prune(args: argparse.Namespace) -> int:
    from datetime import timedelta

    from rebalance_advisor import store

    store.db.require_schema(args.db)
    from rebalance_advisor.store.plans import prune_plans

    deleted = store.prune(timedelta(hours=args.retention_hours), args.db)
    print(f"pruned {deleted} snapshot(s) older than {args.retention_hours:g} h")
    pruned = prune_plans(timedelta(hours=args.plan_retention_hours), args.db)
    print(f"pruned {pruned.plans} plan(s), {pruned.outcomes} outcome(s) and {pruned.runs} advisor run(s) "
          f"older than {args.plan_retention_hours:g} h (standing plans kept)")  # fmt: skip
    return 0
