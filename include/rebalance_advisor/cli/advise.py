"""``rebalance-advisor advise`` (run the planner on a stored snapshot, Spark local) and ``plans``."""

from __future__ import annotations

import argparse
import json
import sys

from rebalance_advisor.cli import DB_HELP


def register(subparsers: argparse._SubParsersAction) -> None:
    from rebalance_advisor.cli.options import add_options
    from rebalance_advisor.domain.parameters import AdvisorParams

    adv = subparsers.add_parser(
        "advise",
        help="plan every group of a stored snapshot (PySpark, local) and record plans and outcomes",
        description="Run the advisor's planner without Airflow: the same job as the DAG, Spark local.",
    )
    adv.add_argument("--db", default=None, help=DB_HELP)
    add_options(adv, AdvisorParams)
    adv.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    adv.add_argument(
        "--bootstrap-servers",
        default=None,
        help="HOST:PORT[,...] to sample record keys when key_range may share keys "
        "(default: $KAFKA_BOOTSTRAP_SERVERS, else the local broker)",
    )
    adv.add_argument("--config", default=None, help="librdkafka .properties file (security settings etc.)")
    adv.add_argument("--format", choices=("table", "json"), default="table")
    adv.set_defaults(func=_advise)

    plans = subparsers.add_parser("plans", help="list plans from the plan table")
    plans.add_argument("--db", default=None, help=DB_HELP)
    plans.add_argument("--group", default=None, help="only this group (empty: no filter: all groups)")
    plans.add_argument("--status", default=None,
                       choices=("recommended", "approved", "published", "superseded", "rejected", "skipped"))  # fmt: skip
    plans.add_argument("--limit", type=_plan_limit, default=None, help="newest N only (1 to 1,000,000)")
    plans.add_argument("--format", choices=("table", "json", "csv"), default="table")
    plans.set_defaults(func=_plans)


#: The most plans ``plans --limit`` lists (also keeps the SQL LIMIT inside a 64-bit integer).
PLANS_LIMIT_MAX = 1_000_000


def _plan_limit(text: str) -> int:
    """``--limit``: a whole number from 1 to :data:`PLANS_LIMIT_MAX` (argparse names the option)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= PLANS_LIMIT_MAX:
        raise argparse.ArgumentTypeError(
            f"must be a whole number from 1 to {PLANS_LIMIT_MAX:,}, not {text!r}"
        )
    return value


def _advise(args: argparse.Namespace) -> int:
    from rebalance_advisor.adapters.spark_session import spark_session
    from rebalance_advisor.cli.options import params_from
    from rebalance_advisor.domain.parameters import AdvisorParams
    from rebalance_advisor.services.advise_service import advise, filter_warning
    from rebalance_advisor.services.outcome_report import format_outcomes, outcome_reasons
    from rebalance_advisor.store import db

    params = params_from(args, AdvisorParams)
    db.require_schema(args.db)  # the one schema check, before Spark starts (fails fast)
    kafka_config = None
    if params.key_sharing and "key_range" in params.strategies:  # key samples need the cluster
        from rebalance_advisor.cli.plan_status import kafka_config_from_args

        kafka_config = kafka_config_from_args(args)
    spark = spark_session(args.master, "rebalance-advisor-advise")
    try:
        run = advise(spark, args.db, params.snapshot, params, kafka_config=kafka_config)
    finally:
        spark.stop()
    warning = filter_warning(params, run)
    if warning:
        print(f"rebalance-advisor: warning: {warning}", file=sys.stderr)
    if run.outcomes is None:  # a large run hands back no lines: the store has them
        from rebalance_advisor.store.plans import run_outcomes

        run.outcomes = run_outcomes(run.run_id, args.db)
    if args.format == "json":
        print(json.dumps(run.to_dict()))
        return 0
    where = "dry run, nothing written" if run.dry_run else f"advisor run {run.run_id}"
    print(f"snapshot {run.snapshot_id}: {run.group_count} groups, {len(run.flagged)} flagged ({where})")
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
