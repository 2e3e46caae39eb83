"""``make airflow``: what it passes to ``rebalance-advisor dev airflow start``, read back by the CLI's
own parser (``make -n`` prints the command without running it). That the stack runs the live group
it asks for is checked on the real stack by tests/e2e/test_airflow_scheduler.py (started ``--live``)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest
from rebalance_advisor.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
PORTS = {"AIRFLOW_PORT": 18080, "KAFKA_PORT": 19093, "POSTGRES_PORT": 19433, "WORKER_LOG_PORT": 18793,
         "TRIGGER_LOG_PORT": 18794}  # fmt: skip


def _start_args(*make_vars: str):
    done = subprocess.run(["make", "-n", "airflow", *make_vars], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if " dev airflow start" in x]
    argv = shlex.split(line)
    return build_parser().parse_args(argv[argv.index("dev") :])


@pytest.mark.parametrize("live", [True, False])
def test_make_airflow_passes_live_and_every_port(live: bool) -> None:
    args = _start_args(*[f"{k}={v}" for k, v in PORTS.items()], *(["LIVE=1"] if live else []))
    assert args.live is live
    given = (args.port, args.kafka_port, args.postgres_port, args.worker_log_port, args.trigger_log_port)
    assert given == tuple(PORTS.values())
