"""Smoke test of bench/txn_restarts.py (the full run is a benchmark): two exactly-once loops of
confluent-kafka alone across one clean broker restart, on a broker of the script's own; the table
and the JSON come out, and the exactly-once check finds every committed offset matched by its
outputs."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.scripts import load_bench


def test_txn_restarts_smoke(tmp_path: Path, capsys) -> None:
    bench = load_bench("txn_restarts")
    out = tmp_path / "txn.json"
    argv = [
        "--partitions",
        "2",
        "--restarts",
        "1",
        "--every",
        "4",
        "--call-timeout",
        "5",
        "--transaction-timeout",
        "8",
        "--json",
        str(out),
    ]
    assert bench.main(argv) == 0
    text = capsys.readouterr().out
    assert "1 (clean shutdown)" in text and "exactly_once_violations" in text
    result = json.loads(out.read_text())
    assert result["calls"] > 0
    assert result["exactly_once_violations"] == []
    assert set(result) >= {
        "overran_timeout",
        "blocked_at_end",
        "hanging_stable_reads",
        "open_output_transactions",
    }
