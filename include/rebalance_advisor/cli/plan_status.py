"""``rebalance-advisor plan-status approve|reject|publish|withdraw|show PLAN_ID``: the plan lifecycle by hand."""

from __future__ import annotations

import argparse
import getpass
import sys

from rebalance_advisor.cli import DB_HELP


def register(subparsers: argparse._SubParsersAction) -> None:
    from rebalance_advisor.cli.options import add_options
    from rebalance_advisor.domain.parameters import ApprovalParams

    status = subparsers.add_parser(
        "plan-status",
        help="approve, reject or publish a plan (recommended -> approved -> published)",
        description="Move a plan through its lifecycle; every change is recorded with who made it.",
    )
    sub = status.add_subparsers(dest="plan_status_command", metavar="ACTION", required=True)
    for action, text in (
        ("approve", "recommended -> approved"),
        (
            "reject",
            "recommended -> rejected; --note REASON is stored and shown, and the group is held back "
            "until its situation changes (docs/operations/plan-lifecycle.md)",
        ),
        ("publish", "approved -> published: write static assignments to Kafka"),
        (
            "withdraw",
            "published -> superseded for a broker-applied plan: its record on the broker plan topic "
            "becomes a tombstone and the group gets uniform's assignment at its next re-assignment",
        ),
        ("show", "the plan's status and its recorded transitions"),
    ):
        p = sub.add_parser(action, help=text)
        add_options(p, ApprovalParams, ("plan_id",))
        p.add_argument("--db", default=None, help=DB_HELP)
        if action != "show":
            p.add_argument("--actor", default=None, help="who decides (default: the OS user)")
            add_options(p, ApprovalParams, ("note",))
        if action in ("approve", "publish", "withdraw"):
            _add_kafka_arguments(p)
        if action == "approve":
            p.add_argument("--publish", action="store_true", help="publish right after approving")
        p.set_defaults(func=_run, action=action)


def _add_kafka_arguments(parser: argparse.ArgumentParser) -> None:
    """Where a publish goes: the cluster, its client settings, the topic, how long to wait."""
    parser.add_argument(
        "--bootstrap-servers",
        default=None,
        help="HOST:PORT[,...] for publishing (default: $KAFKA_BOOTSTRAP_SERVERS, else the local broker)",
    )
    parser.add_argument("--config", default=None, help="librdkafka .properties file (security settings etc.)")
    parser.add_argument(
        "--topic", default=None, help="assignment topic (default _rebalance_advisor_assignments)"
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds for Kafka (default 30)")


def kafka_config_from_args(args: argparse.Namespace) -> dict:
    """Client settings from ``--config`` and ``--bootstrap-servers`` (shared with ``advise``)."""
    from rebalance_advisor.adapters import kafka_snapshot
    from rebalance_advisor.cli.demo import resolve_bootstrap

    config = kafka_snapshot.read_client_config(args.config) if args.config else {}
    config["bootstrap.servers"] = (
        args.bootstrap_servers or config.get("bootstrap.servers") or resolve_bootstrap(None)
    )
    return config


def _show(args: argparse.Namespace) -> int:
    from rebalance_advisor.services.plan_lifecycle import UnknownPlan, allowed_from
    from rebalance_advisor.store.plans import get_plan

    plan = get_plan(args.plan_id, args.db)
    if plan is None:
        raise UnknownPlan(f"plan {args.plan_id} does not exist")
    epoch = f", epoch {plan.epoch}" if plan.epoch is not None else ""
    nexts = ", ".join(allowed_from(plan.status)) or "none (final)"
    print(
        f"plan {plan.id} of group {plan.group_id}: {plan.status}{epoch}; next: {nexts}; applied by: {plan.apply_mode}"
    )
    for a in plan.assignments:  # key ranges of split partitions (key_range)
        if a.key_hash_start is not None:
            print(f"  key range {a.topic}-{a.partition} [{a.key_hash_start}, {a.key_hash_end})"
                  f" -> {a.member_id} (lag {a.lag})")  # fmt: skip
    for t in plan.transitions:
        run = f" run {t.airflow_run_id}" if t.airflow_run_id else ""
        print(f"  {t.at:%Y-%m-%d %H:%M:%S}  {t.from_status or '-'} -> {t.to_status}  by {t.actor}{run}"
              + (f"  ({t.note})" if t.note else ""))  # fmt: skip
    return 0


def _run(args: argparse.Namespace) -> int:
    from rebalance_advisor.services import plan_lifecycle
    from rebalance_advisor.store import db

    db.require_schema(args.db)
    if args.action == "show":
        return _show(args)
    actor = args.actor or getpass.getuser()
    if args.action in ("approve", "reject"):
        decide = plan_lifecycle.approve if args.action == "approve" else plan_lifecycle.reject
        done = decide(args.plan_id, actor, args.db, note=args.note)
        print(
            f"plan {done.plan_id} of group {done.group_id}: {done.from_status} -> {done.to_status} by {actor}"
        )
        if not (args.action == "approve" and args.publish):
            return 0
    config = kafka_config_from_args(args)
    if args.action == "withdraw":
        done = plan_lifecycle.withdraw(
            args.plan_id, config, actor, args.db, note=args.note, timeout=args.timeout
        )
        print(f"plan {done.plan_id} of group {done.group_id} withdrawn: {done.from_status} -> {done.to_status}"
              " (the group gets uniform's assignment at its next re-assignment)")  # fmt: skip
        return 0
    return _publish(args, config, actor)


def _publish(args: argparse.Namespace, config: dict, actor: str) -> int:
    """Publish the plan and say what it did: the epoch, its members, the broker's re-assignment, who
    got an empty assignment, which plans it superseded."""
    from rebalance_advisor_client.assignment_records import DEFAULT_TOPIC

    from rebalance_advisor.services import plan_lifecycle

    result = plan_lifecycle.publish(
        args.plan_id, config, actor, args.db, note=args.note, topic=args.topic or DEFAULT_TOPIC,
        timeout=args.timeout,
    )  # fmt: skip
    if not result.changed:
        print(f"plan {result.plan_id} is already published at epoch {result.epoch}: nothing changed"
              + (f"; broker: {result.reassignment}" if result.reassignment else ""))  # fmt: skip
        return 0
    print(f"plan {result.plan_id} of group {result.group_id} published at epoch {result.epoch}"
          f" to {len(result.members)} member(s), applied by: {result.apply_mode}")  # fmt: skip
    if result.reassignment:
        print(f"  broker: {result.reassignment}")
    if result.dropped:
        print(f"  empty assignment for: {', '.join(result.dropped)}")
    if result.superseded:
        print(f"  superseded: {', '.join(map(str, result.superseded))}")
    sys.stdout.flush()
    return 0
