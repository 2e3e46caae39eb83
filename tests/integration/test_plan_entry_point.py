"""The installed ``rebalance-advisor`` command runs ``plan`` in its own process: JSON in, JSON out, and
bad input -> exit 1 without a traceback (the in-process cases: tests/unit/test_plan_cli.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests._groups import group

WORKED = group([("C0", ["t0"]), ("C1", ["t0"])], {"t0": [100_000, 60_000, 50_000]})


def test_installed_entry_point(tmp_path):
    exe = shutil.which("rebalance-advisor", path=os.path.dirname(sys.executable)) or shutil.which(
        "rebalance-advisor"
    )
    cmd = [exe] if exe else [sys.executable, "-m", "rebalance_advisor.cli"]
    env = dict(os.environ)
    if not exe:
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2] / "include")
    done = subprocess.run(
        [*cmd, "plan", "--input", "-", "--strategy", "lag_aware"],
        input=json.dumps(WORKED),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["assignment"]["C0"] == [["t0", 0]]
    bad = subprocess.run(
        [*cmd, "plan", "--input", "-", "--strategy", "range"],
        input="[]",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
