"""``rebalance-advisor advise`` (run the planner on a stored snapshot, Spark local) and ``plans``."""

from __future__ import annotations

import argparse
import json
import sys

DB_HELP = "SQLAlchemy URL (default: $REBALANCE_ADVISOR_DB_URL or the SQLite file)"


def _budget(value: str) -> int | None:
    if value.strip().lower() in ("", "none", "unlimited"):
        return None
    number = int(value)
    if number < 0:
        raise argparse.ArgumentTypeError("must be >= 0 or 'unlimited'")
    return number


def register(subparsers: argparse._SubParsersAction) -> None:
    from rebalance_advisor.domain.decisions import DEFAULT_STRATEGIES, Thresholds

    d = Thresholds()
    adv = subparsers.add_parser(
        "advise",
        help="plan every group of a stored snapshot (PySpark, local) and record plans and outcomes",
        description="Run the advisor's planner without Airflow: the same job as the DAG, Spark local.",
    )
    adv.add_argument("--db", default=None, help=DB_HELP)
    adv.add_argument(
        "--snapshot", default="latest", metavar="ID|latest", help="which snapshot (default latest)"
    )
    adv.add_argument(
        "--groups", default=None, metavar="REGEX", help="only groups whose id fully matches REGEX"
    )
    adv.add_argument(
        "--strategies", default=",".join(DEFAULT_STRATEGIES), help="comma-separated candidates (default: all)"
    )
    adv.add_argument("--imbalance-threshold", type=float, default=d.imbalance_threshold,
                     help=f"flag when max/mean member lag >= this (default {d.imbalance_threshold})")  # fmt: skip
    adv.add_argument("--lag-floor", type=int, default=d.lag_floor,
                     help=f"flag only groups with total lag >= this (default {d.lag_floor})")  # fmt: skip
    adv.add_argument("--min-improvement", type=float, default=d.min_improvement,
                     help=f"recommend only when max lag drops by this fraction (default {d.min_improvement})")  # fmt: skip
    adv.add_argument("--move-budget", type=_budget, default=None, metavar="N|unlimited",
                     help="most partitions a plan may move (default unlimited)")  # fmt: skip
    adv.add_argument("--cooldown-minutes", type=float, default=d.cooldown_minutes,
                     help=f"no new recommendation for a group within this (default {d.cooldown_minutes:g})")  # fmt: skip
    adv.add_argument("--weight", choices=("lag", "drain_ms"), default="lag",
                     help="partition weight: lag messages, or time to drain at the consume rate")  # fmt: skip
    adv.add_argument("--reset-policy", default=None, metavar="SPEC",
                     help="auto.offset.reset per group, e.g. 'orders-.*=earliest,latest'")  # fmt: skip
    adv.add_argument("--dry-run", action="store_true", help="plan and print, write nothing")
    adv.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    adv.add_argument("--format", choices=("table", "json"), default="table")
    adv.set_defaults(func=_advise)

    plans = subparsers.add_parser("plans", help="list plans from the plan table")
    plans.add_argument("--db", default=None, help=DB_HELP)
    plans.add_argument("--group", default=None, help="only this group")
    plans.add_argument("--status", default=None,
                       choices=("recommended", "approved", "published", "superseded", "rejected", "skipped"))  # fmt: skip
    plans.add_argument("--limit", type=int, default=None, help="newest N only")
    plans.add_argument("--format", choices=("table", "json", "csv"), default="table")
    plans.set_defaults(func=_plans)


def _advise(args: argparse.Namespace) -> int:
    from rebalance_advisor.adapters.spark_planner import run_planner
    from rebalance_advisor.adapters.spark_session import spark_session
    from rebalance_advisor.domain.decisions import Thresholds
    from rebalance_advisor.services.outcome_report import format_outcomes, outcome_reasons
    from rebalance_advisor.store import db

    thresholds = Thresholds(
        imbalance_threshold=args.imbalance_threshold,
        lag_floor=args.lag_floor,
        min_improvement=args.min_improvement,
        move_budget=args.move_budget,
        cooldown_minutes=args.cooldown_minutes,
        strategies=tuple(s.strip() for s in args.strategies.split(",") if s.strip()),
    )
    db.require_schema(args.db)
    spark = spark_session(args.master, "rebalance-advisor-advise")
    try:
        run = run_planner(
            spark,
            args.db,
            args.snapshot,
            thresholds,
            group_pattern=args.groups,
            reset=args.reset_policy,
            weight=args.weight,
            created_by="cli",
            dry_run=args.dry_run,
        )
    finally:
        spark.stop()
    if args.format == "json":
        print(json.dumps(run.to_dict()))
        return 0
    where = "dry run, nothing written" if run.dry_run else f"advisor run {run.run_id}"
    print(f"snapshot {run.snapshot_id}: {len(run.outcomes)} groups, {len(run.flagged)} flagged ({where})")
    print(format_outcomes(run.outcomes))
    if run.outcomes:
        print()
        print(outcome_reasons(run.outcomes))
    return 0


def _plans(args: argparse.Namespace) -> int:
    from rebalance_advisor.services.outcome_report import format_plans
    from rebalance_advisor.store import db
    from rebalance_advisor.store.plans import list_plans

    db.require_schema(args.db)
    rows = list_plans(args.db, group=args.group, status=args.status, limit=args.limit)
    sys.stdout.write(format_plans(rows, args.format))
    return 0
