"""``rebalance-advisor plan``: one group in (JSON), one plan out (JSON or a table).

Input, from a file or stdin (``group_instance_id``, ``owned`` and ``generation`` are optional)::

    {"group_id": "g",
     "members": [{"member_id": "C0", "group_instance_id": null, "topics": ["t0"],
                  "owned": [["t0", 0]], "generation": 1}],
     "partitions": [{"topic": "t0", "partition": 0, "lag": 100000}]}

Output::

    {"group_id": "g", "strategy": "lag_aware",
     "assignment": {"C0": [["t0", 0]]},
     "metrics": {"member_lag": {"C0": 100000}, "max_member_lag": 100000, "imbalance": 1.0,
                 "lag_cv": 0.0, "partition_count_spread": 0, "moves": 0,
                 "lower_bound_max_lag": 100000, "gap": 0.0,
                 "member_partitions": {"C0": 1}, "max_topic_partition_count_spread": 0}}

Every member appears in ``assignment`` (an empty list when it gets nothing), members in Kafka's
order, each list sorted by (topic, partition). This is the stable exchange format for bringing a
group from elsewhere; new keys may be added, existing ones keep their meaning.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rebalance_advisor.errors import AdvisorError

if TYPE_CHECKING:
    import numpy as np

    from rebalance_advisor.domain.group_spec import GroupSpec

STRATEGY_HELP = (
    "range, roundrobin, sticky, lag_aware, lag_aware_sticky, rate_aware, rate_aware_sticky, "
    "key_range (JSON: see domain/key_range_documents.py)"
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="plan an assignment for one group given as JSON",
        description="Plan an assignment for one consumer group described as JSON (see the module docs).",
    )
    parser.add_argument("--input", required=True, metavar="FILE", help="group JSON file, or - for stdin")
    parser.add_argument("--strategy", required=True, metavar="NAME", help=f"one of: {STRATEGY_HELP}")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="strategy option, repeatable: lag_scope=group|topic (lag_aware); "
        "move_budget=N|unlimited, min_gain=X|auto (lag_aware_sticky; its moves stay within "
        "max(move_budget, the moves sticky itself must make for balance or changed subscriptions)); "
        "horizon_s=S (rate_aware, rate_aware_sticky), move_budget=N, min_gain=F (rate_aware_sticky)",
    )
    parser.add_argument("--format", choices=("json", "table"), default="json", help="output format")
    parser.set_defaults(func=run)


def read_json_input(source: str) -> Any:
    """JSON from a file or ``-`` (stdin); unreadable, non-UTF-8 or invalid JSON -> one-line AdvisorError.

    NaN/Infinity literals parse (Python's json allows them); the field validators refuse them.
    """
    try:
        if source == "-":
            text = sys.stdin.read()
        else:
            with open(source, encoding="utf-8") as handle:
                text = handle.read()
    except OSError as error:
        raise AdvisorError(f"cannot read input file {source!r}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise AdvisorError(f"{source} is not UTF-8 text") from None
    except ValueError as error:  # a path with a NUL character
        raise AdvisorError(f"cannot read input file {source!r}: {error}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise AdvisorError(
            f"{source} is not valid JSON: {error.msg} at line {error.lineno} column {error.colno}"
        ) from None
    except RecursionError:
        raise AdvisorError(f"{source}: JSON nested too deeply") from None


def _parse_options(pairs: list[str]) -> dict[str, str]:
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise AdvisorError(f"--option {pair!r}: expected key=value")
        if key.strip() in options:
            raise AdvisorError(f"--option {key.strip()!r} given twice")
        options[key.strip()] = value.strip()
    return options


def build_plan(
    data: Any, strategy: str, options: dict[str, Any], now: datetime | None = None
) -> dict[str, Any]:
    """The plan JSON document for one group: pure given ``now``, so tests and other callers can use it.

    ``load`` is the load model of the current assignment and of this plan (per member inflow,
    backlog, capacity, predicted catch-up; null catch-up = never, the member is overloaded);
    ``advice`` is what the advisor's decision rule (default parameters) says about the group, from
    the same function the planner runs (``group_planning.advise_group``).
    """
    from rebalance_advisor.domain.assignors import get_assignor
    from rebalance_advisor.domain.decisions import Thresholds
    from rebalance_advisor.domain.group_planning import advise_group, observe_document
    from rebalance_advisor.domain.group_spec import parse_group_spec
    from rebalance_advisor.domain.metrics import compute_metrics

    if strategy == "key_range":
        return _key_range_plan(data, options)
    assignor = get_assignor(strategy)
    spec = parse_group_spec(data)  # the whole format, every key checked
    observation = observe_document(data)  # and the recent moves
    owners = assignor.owners(spec, **options)
    assignment = spec.to_assignment(owners)
    metrics = compute_metrics(spec, owners).to_dict()
    for key in ("imbalance", "lag_cv", "gap"):
        metrics[key] = round(metrics[key], 6)
    thresholds = Thresholds()
    load = _load_document(spec, owners, thresholds.horizon_s)
    advice = advise_group(observation, thresholds, now or datetime.now(UTC))
    return {
        "group_id": spec.group_id,
        "strategy": assignor.name,
        "assignment": {member: [[t, p] for t, p in parts] for member, parts in assignment.items()},
        "metrics": metrics,
        "load": load,
        "advice": {"outcome": advice.outcome, "reason": advice.reason, "best_strategy": advice.best_strategy},
    }


def _key_range_plan(data: Any, options: dict[str, Any]) -> dict[str, Any]:
    """key_range's plan: its inputs are all in the JSON (domain/key_range_documents.py)."""
    from rebalance_advisor.domain.key_range_documents import build_key_range_plan

    if options:
        raise AdvisorError(
            "key_range takes no --option: put key_sharing, key_samples and capacity in the JSON"
        )
    return build_key_range_plan(data)


def _load_document(spec: GroupSpec, owners: np.ndarray, horizon_s: float) -> dict[str, Any]:
    """The load model of the current assignment (``before``) and of the plan's owners (``after``)."""
    from dataclasses import asdict

    from rebalance_advisor.domain.advice import finite
    from rebalance_advisor.domain.load_model import load_inputs, summarize

    inputs = load_inputs(spec)
    before = summarize(spec, spec.owner, inputs, horizon_s)
    after = summarize(spec, owners, inputs, horizon_s)
    return finite(
        {
            "rates_known": inputs.rates_known,
            "note": inputs.note,
            "before": asdict(before[0]) | {"members": asdict(before[1])},
            "after": asdict(after[0]) | {"members": asdict(after[1])},
        }
    )


def format_plan_table(plan: dict[str, Any]) -> str:
    """The plan for a person: one row per member, then the metrics."""
    metrics = plan["metrics"]
    rows = [("member", "partitions", "lag", "assigned")]
    for member, parts in plan["assignment"].items():
        listed = ", ".join(f"{t}-{p}" for t, p in parts) or "-"
        rows.append((member, str(len(parts)), str(metrics["member_lag"][member]), listed))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"group {plan['group_id']}  strategy {plan['strategy']}", ""]
    for i, row in enumerate(rows):
        lines.append(
            f"{row[0]:<{widths[0]}}  {row[1]:>{widths[1]}}  {row[2]:>{widths[2]}}  {row[3]}".rstrip()
        )
        if i == 0:
            lines.append("-" * (sum(widths) + 4 + 2 + len("assigned")))
    lines.append("")
    for key in (
        "max_member_lag",
        "lower_bound_max_lag",
        "gap",
        "imbalance",
        "lag_cv",
        "partition_count_spread",
        "max_topic_partition_count_spread",
        "moves",
    ):
        lines.append(f"{key:<34} {metrics[key]}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    plan = build_plan(read_json_input(args.input), args.strategy, _parse_options(args.option))
    if args.format == "table" and plan["strategy"] == "key_range":
        from rebalance_advisor.cli.key_range_plan import format_key_range_table

        print(format_key_range_table(plan))
    elif args.format == "table":
        print(format_plan_table(plan))
    else:
        print(json.dumps(plan))
    return 0
