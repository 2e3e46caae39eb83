"""``rebalance-advisor simulate``: replay a what-if scenario of one group over time.

The scenario is JSON (see :class:`rebalance_advisor.domain.simulation.Scenario`)::

    {"topics": [{"name": "orders", "partitions": 24, "total_rate": 6000, "zipf": 1.1}],
     "members": [{"id": "c0", "capacity": 3000}, {"id": "c1", "capacity": 6000}],
     "drift_sigma": 0.2, "daily_swing": 0.2,
     "events": [{"at_s": 3600, "kind": "member_leave", "member": "c1"}],
     "replan_interval_s": 60, "handover_s": 5, "hours": 6, "strategy": "current_rule"}

Prints one summary row per strategy (``--strategy a,b`` runs several on the same scenario and
seed); ``--json`` writes the summaries and per-step series, ``--plot`` a PNG of max member lag,
p99 time lag and overloaded members over time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path

from rebalance_advisor.cli.plan import read_json_input
from rebalance_advisor.errors import AdvisorError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="what-if simulation of one group over time under a strategy",
        description="Simulate one consumer group over time (fluid model) and summarise lag, time lag, "
        "overload and moves. See the module docs for the scenario JSON.",
    )
    parser.add_argument(
        "--scenario", required=True, metavar="FILE", help="scenario JSON file, or - for stdin"
    )
    parser.add_argument(
        "--strategy",
        metavar="NAME[,NAME]",
        help="overrides the scenario's strategy; comma-separated to compare several "
        "(range, roundrobin, sticky, lag_aware, lag_aware_sticky, current_rule, oracle, ...)",
    )
    parser.add_argument("--hours", type=float, metavar="H", help="simulated hours (overrides the scenario)")
    parser.add_argument("--seed", type=int, metavar="N", help="random seed (overrides the scenario)")
    parser.add_argument("--json", metavar="OUT", help="write summaries and time series as JSON here")
    parser.add_argument("--plot", metavar="OUT.png", help="write a PNG plot here")
    parser.set_defaults(func=run)


def _write_atomically(path: str, data: bytes) -> None:
    """Write via a temporary file and rename, so a failure leaves nothing half-written."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, target)
    except OSError as error:
        tmp.unlink(missing_ok=True)
        raise AdvisorError(f"cannot write {path}: {error.strerror or error}") from None


def _format_table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    )


def run(args: argparse.Namespace) -> int:
    from rebalance_advisor.domain.simulation import parse_scenario, simulate, summarize_table

    if args.hours is not None and not (math.isfinite(args.hours) and args.hours > 0):
        raise AdvisorError(f"--hours must be a number > 0, got {args.hours}")
    data = read_json_input(args.scenario)
    names = [s.strip() for s in args.strategy.split(",")] if args.strategy else [None]
    if any(n == "" for n in names):
        raise AdvisorError("--strategy: empty strategy name in the list")
    scenarios = [parse_scenario(data, strategy=n, hours=args.hours, seed=args.seed) for n in names]
    results = [simulate(sc) for sc in scenarios]
    sc = scenarios[0]
    print(
        f"scenario {sc.name}: {len(results[0].partition_names)} partitions, {len(sc.members)} members, "
        f"{results[0].summary.hours:g} h, step {sc.step_s:g} s, re-plan every {sc.replan_interval_s:g} s, "
        f"handover {sc.handover_s:g} s, seed {sc.seed}"
    )
    print(_format_table(summarize_table([r.summary for r in results])))
    if args.json:
        document = {
            "scenario": sc.model_dump(mode="json", exclude={"strategy"}),
            "runs": [
                {"strategy": r.summary.strategy, "summary": r.summary.to_dict(), "series": r.series_dict()}
                for r in results
            ],
        }
        _write_atomically(args.json, json.dumps(document).encode())
        print(f"wrote {args.json}")
    if args.plot:
        _write_atomically(args.plot, _plot_png(results))
        print(f"wrote {args.plot}")
    return 0


def _plot_png(results: list) -> bytes:
    """Max member lag, p99 time lag across partitions and overloaded members over time, one line per run."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
    for r in results:
        hours = r.time_s / 3600.0
        axes[0].plot(hours, r.max_member_lag, label=r.summary.strategy, linewidth=1)
        p99 = np.percentile(r.time_lag, 99, axis=1) if r.time_lag.size else np.zeros(0)
        axes[1].plot(r.sample_time_s / 3600.0, p99, label=r.summary.strategy, linewidth=1)
        axes[2].step(hours, r.overloaded_members, where="post", label=r.summary.strategy, linewidth=1)
    axes[0].set_ylabel("max member lag (msgs)")
    axes[1].set_ylabel("p99 time lag (s)")
    axes[2].set_ylabel("overloaded members")
    axes[2].set_xlabel("hours")
    axes[0].legend(loc="upper left", fontsize="small")
    axes[0].set_title(results[0].scenario.name)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()
