"""Torture run of the client helper's handover (docs/benchmarks/torture.md): long combined faults, per mode.

    .venv/bin/python bench/torture.py                 # fenced 10 min + unfenced 5 min (default)
    .venv/bin/python bench/torture.py --minutes 1 --modes fenced
    .venv/bin/python bench/torture.py --calm --minutes 1 --unfenced-minutes 1   # handovers alone

Starts a broker of its own (the nemesis restarts it), runs tests.support.torture per
configuration, prints a table and writes JSON to bench/results/torture.json (with `uptime` load).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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
    ("broker_restarts", "restarts"),
    ("normal_handovers", "handovers"),
    ("normal_handovers_in_warmup", "in_warmup"),
    ("takeovers", "takeovers"),
    ("handover_pause_p50_s", "p50_s"),
    ("handover_pause_p99_s", "p99_s"),
    ("owner_gap_p99_s", "gap_p99_s"),
]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0, help="faults per fenced configuration")
    parser.add_argument("--unfenced-minutes", type=float, default=5.0)
    parser.add_argument("--modes", default="fenced,unfenced")
    parser.add_argument("--broker-restart-every", type=float, default=120.0)
    parser.add_argument(
        "--warmup",
        type=float,
        default=Config.warmup,
        help="seconds after the first plan whose handovers stay out of the pause percentiles",
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
    results_file = RESULTS.with_name("torture_calm.json") if args.calm else RESULTS
    results_file.parent.mkdir(exist_ok=True)
    results_file.write_text(
        json.dumps(
            {
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                "work_dir": str(work),
                "results": results,
            },
            indent=2,
        )
    )
    print(f"\nwritten {results_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
