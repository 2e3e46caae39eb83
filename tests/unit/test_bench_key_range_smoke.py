"""Smoke test of bench/key_range.py (the broker sections are a benchmark, not a test; the e2e test
tests/e2e/test_key_range_broker.py covers their logic): the filter section, briefly."""

from __future__ import annotations

import json

from tests.support.scripts import load_bench


def test_key_range_bench_hash_section_smoke(tmp_path, capsys):
    bench = load_bench("key_range")
    out = tmp_path / "key_range.json"
    assert bench.main(["--only", "hash", "--seconds", "0.02", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "\ntargets:" in text and "records/s filtered per consumer" in text
    doc = json.loads(out.read_text())
    rows = doc["hash"]["rows"]
    assert {r["keys"] for r in rows} == {"fixed 16 B", "varying 6-17 B", "uuid 36 B", "varying 1-200 B"}
    assert all(r["records_per_cpu_s"] > 0 and 0.1 < r["kept"] < 0.4 for r in rows)  # a quarter of the space
    assert doc["hash"]["target"]["status"] in {"PASS", "FAIL"}
    assert "drain" not in doc and "handover" not in doc
