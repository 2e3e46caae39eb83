"""Smoke test of bench/snapshot.py's fleet mode (the full run is a benchmark, not a test): one small
size on the session broker; the table and the JSON come out, with every fleet row compared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.scripts import load_bench

pytestmark = pytest.mark.kafka


def test_fleet_mode_smoke(kafka_bootstrap: str, tmp_path: Path, capsys) -> None:
    bench = load_bench("snapshot")
    out = tmp_path / "fleet.json"
    argv = ["--fleet", "24", "--fleet-topics", "3", "--rounds", "1", "--skip-stages", "--bootstrap-servers", kafka_bootstrap,
            "--db", f"sqlite:///{tmp_path / 'fleet.db'}", "--output", str(out)]  # fmt: skip
    assert bench.main(argv) == 0
    text = capsys.readouterr().out
    assert "speedup" in text and "24 groups" in text
    [size] = json.loads(out.read_text())["sizes"]
    assert size["groups"] == 24 and size["reference_finished"]
    # 24 groups on the first 1-8 partitions of one topic each: every row of the reference tool's
    # output for them equals ours
    assert 24 <= size["rows"]["rows"] == size["committed_offsets"] <= 24 * 8
    assert size["rows"]["differ"] == 0 and size["rows_compared"] == "all"
    assert size["cpu_s"]["ours"][0] > 0 and size["max_rss_mib"]["ours"] > 0
