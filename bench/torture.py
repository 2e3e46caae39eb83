"""Torture run of the client helper's handover (docs/benchmarks/torture.md): long combined faults, per mode.

    .venv/bin/python bench/torture.py                 # fenced 10 min + unfenced 5 min (default)
    .venv/bin/python bench/torture.py --minutes 1 --modes fenced
    .venv/bin/python bench/torture.py --workers 8 --partitions 48 --modes fenced
    .venv/bin/python bench/torture.py --calm --minutes 1 --unfenced-minutes 1   # handovers alone

Workers run with the clients' default transaction timeout (60 s) unless --transaction-timeout;
half the kills (fenced) land between send_offsets_to_transaction and commit_transaction.
Liveness columns: stall_s (the longest a partition went unprocessed while the newest plan gave
it to a running member), over_budget (stalls above takeover timeout + 5 s), rightful (logged fences
of a member holding the partition under a newer epoch than the fencing claim), owner_fenced (holders
fenced while every plan since their claim gave them the partition, whoever fenced them: seen from
the victim's side, so fences no claim logged count too) and by_unlogged (of those, no logged fence
explains), docs/protocol/liveness.md.

Starts a broker of its own (the nemesis restarts it), runs tests.support.torture per
configuration, prints a table and writes JSON to bench/results/torture.json (with `uptime` load).
Each stall over budget is printed with the causes its timeline shows; --keep keeps the work
directory, whose <configuration>/stalls.txt has each stall's timeline (plans, pauses, kills,
broker restarts and when its coordinators answered, the claims' steps from the workers' logs);
`python -m tests.support.torture_stalls <work>/<configuration>` explains a kept run again.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.torture import Config, OwnBroker, Run  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "torture.json"
COLUMNS = [
    ("configuration", "config"),
    ("seconds_of_faults", "s"),
    ("produced", "produced"),
    ("processed_unique", "processed"),
    ("lost", "lost"),
    ("committed_offset_regressions", "regress"),
    ("commits_from_superseded_owners", "supersed"),
    ("commits_accepted_from_fenced_members", "fenced_ok"),
    ("output_duplicates", "out_dup"),
    ("outputs_lost", "out_lost"),
    ("pauses_longer_than_timeout", "long_pause"),
    ("aimed_pauses", "aimed"),
    ("kills", "kills"),
    ("kills_in_transaction", "in_txn"),
    ("broker_restarts", "restarts"),
    ("normal_handovers", "handovers"),
    ("normal_handovers_in_warmup", "in_warmup"),
    ("takeovers", "takeovers"),
    ("handover_pause_p50_s", "p50_s"),
    ("handover_pause_p99_s", "p99_s"),
    ("owner_gap_p99_s", "gap_p99_s"),
    ("stall_max_s", "stall_s"),
    ("stalls_over_budget", "over_budget"),
    ("fences_of_rightful_owners", "rightful"),
    ("owners_fenced_while_rightful", "owner_fenced"),
    ("owners_fenced_by_unlogged_fences", "by_unlogged"),
    ("fences_at_an_older_epoch", "old_epoch"),
]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0, help="faults per fenced configuration")
    parser.add_argument("--unfenced-minutes", type=float, default=5.0)
    parser.add_argument("--modes", default="fenced,unfenced")
    parser.add_argument("--broker-restart-every", type=float, default=120.0)
    parser.add_argument("--workers", type=int, default=Config.workers)
    parser.add_argument("--partitions", type=int, default=Config.partitions)
    parser.add_argument("--rate", type=float, default=Config.rate, help="records per second, all partitions")
    parser.add_argument(
        "--transaction-timeout", type=float, help="workers' transaction timeout, s (default: the helper's 60)"
    )
    parser.add_argument(
        "--warmup",
        type=float,
        default=Config.warmup,
        help="seconds after the first plan whose handovers stay out of the pause percentiles",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the work directory (workers' logs, events.json, stalls.txt, the broker's data)",
    )
    parser.add_argument(
        "--calm",
        action="store_true",
        help="plans only: no pauses, kills or broker restarts (handover pause alone)",
    )
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop workers and broker on the way out
    work = Path(tempfile.mkdtemp(prefix="rebalance-advisor-torture-"))
    broker = OwnBroker(work / "kafka")
    results = []
    try:
        for mode in args.modes.split(","):
            minutes = args.minutes if mode == "fenced" else args.unfenced_minutes
            config = Config(
                name=f"{mode}-combined",
                fenced=mode == "fenced",
                duration=minutes * 60,
                broker_restart_every=args.broker_restart_every,
                warmup=args.warmup,
                workers=args.workers,
                partitions=args.partitions,
                rate=args.rate,
                transaction_timeout=args.transaction_timeout,
                in_transaction_kills=0.5 if mode == "fenced" else 0.0,
            )
            if args.calm:
                never = (1e9, 1e9)
                config = replace(
                    config, name=f"{mode}-calm", pause_every=never, kill_every=never, self_pause=0.0,
                    broker_restart_every=None, burst_probability=0.0,
                )  # fmt: skip
            run_dir = work / config.name
            run_dir.mkdir()
            started = time.time()
            result = Run(config, broker.bootstrap, broker, run_dir).execute()
            result["wall_seconds"] = round(time.time() - started, 1)
            result["load_after"] = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
            results.append(result)
            print(json.dumps(result), flush=True)
    finally:
        broker.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print("  ".join(f"{label:>10}" for _, label in COLUMNS))
    for result in results:
        print("  ".join(f"{str(result.get(key, '-')):>10}" for key, _ in COLUMNS))
        print(f"   duplicates by cause: {result['duplicates']}")
        print(
            f"   normal handovers in the first {result['warmup_s']:.0f} s (warm-up, left out of the "
            f"pause percentiles; every other counter covers the whole run): "
            f"{result['normal_handovers_in_warmup']}"
        )
        for text in result["slow_normal_handovers"]:  # each to look up in the work dir's logs
            print(f"   normal handover over 1 s: {text}")
        for text in result["stall_windows"]:  # over budget, with what the timeline shows
            print(f"   stall over budget: {text}")
        if args.keep:
            print(f"   each stall's timeline: {work / result['configuration'] / 'stalls.txt'}")
        for text in result["examples"]["fences_of_rightful_owners"]:
            print(f"   fence of a rightful owner: {text}")
        for text in result["examples"]["owners_fenced_while_rightful"]:
            print(f"   owner fenced while every plan gave it the partition: {text}")
    results_file = RESULTS.with_name("torture_calm.json") if args.calm else RESULTS
    if (args.workers, args.partitions) != (Config.workers, Config.partitions):
        results_file = results_file.with_name(f"{results_file.stem}_{args.workers}x{args.partitions}.json")
    results_file.parent.mkdir(exist_ok=True)
    results_file.write_text(
        json.dumps(
            {
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                "work_dir": str(work) if args.keep else None,
                "results": results,
            },
            indent=2,
        )
    )
    print(f"\nwritten {results_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
