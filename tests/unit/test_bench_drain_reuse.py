"""bench/drain.py --reuse: earlier runs are taken for the other strategies, never for the one under
test, and only from a file of the same seeds, hours and scenario definition."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.scripts import load_bench

drain = load_bench("drain")


def _results(path: Path, defs: dict, seeds: int = 2, hours: float = 1.0, digest: str | None = None) -> str:
    runs = [
        {"scenario": "small-z1.1", "strategy": strategy, "seed": seed}
        for strategy in ("range", "rate_aware", "oracle_late")
        for seed in range(seeds)
    ]
    doc = {
        "hours": hours,
        "seeds": seeds,
        "scenario_digests": {"small-z1.1": digest or drain.scenario_digest(defs["small-z1.1"])},
        "runs": runs,
    }
    path.write_text(json.dumps(doc))
    return str(path)


def test_the_strategy_under_test_is_never_reused(tmp_path: Path) -> None:
    defs = drain.scenario_defs()
    found = drain.reusable(_results(tmp_path / "r.json", defs), 1.0, 2, defs)
    assert sorted(found) == [("small-z1.1", "oracle_late"), ("small-z1.1", "range")]
    assert [r["seed"] for r in found[("small-z1.1", "range")]] == [0, 1]


def test_runs_of_another_definition_are_not_reused(tmp_path: Path) -> None:
    defs = drain.scenario_defs()
    assert drain.reusable(_results(tmp_path / "r.json", defs, digest="0" * 16), 1.0, 2, defs) == {}
    with pytest.raises(SystemExit, match="made with 2 seeds x 1.0 h, not 3 x 1"):
        drain.reusable(_results(tmp_path / "s.json", defs), 1.0, 3, defs)
