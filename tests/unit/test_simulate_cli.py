"""``rebalance-advisor simulate``: summary table, JSON series, PNG plot; bad input -> one line, exit 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rebalance_advisor.cli import main

WORKED = {
    "name": "kip-example",
    "topics": [{"name": "t0", "partitions": 3, "lags": [100_000, 60_000, 50_000]}],
    "members": [{"id": "C0", "capacity": 1000}, {"id": "C1", "capacity": 1000}],
    "hours": 0.1,
    "rate_pass_s": 0,  # the planner runs on the first snapshot (the worked example's plan at 0 s)
}


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "scenario.json"
    path.write_text(text)
    return str(path)


def test_simulate_table_json_and_plot(tmp_path, capsys):
    out_json, out_png = tmp_path / "run.json", tmp_path / "run.png"
    rc = main(
        [
            "simulate",
            "--scenario",
            write(tmp_path, json.dumps(WORKED)),
            "--strategy",
            "range,current_rule",
            "--json",
            str(out_json),
            "--plot",
            str(out_png),
        ]
    )
    assert rc == 0
    lines = capsys.readouterr().out.splitlines()
    # drain times by hand (see tests/unit/test_simulation.py): range 160 s, current rule 110 s
    rows = {line.split()[0]: line.split() for line in lines if line.startswith(("range", "current_rule"))}
    assert rows["range"][-1] == "160" and rows["current_rule"][-1] == "110"
    doc = json.loads(out_json.read_text())
    assert [r["strategy"] for r in doc["runs"]] == ["range", "current_rule"]
    current = doc["runs"][1]
    assert current["summary"]["time_to_drain_s"] == 110.0 and current["summary"]["moves"] == 1
    series = current["series"]
    assert len(series["time_s"]) == len(series["max_member_lag"]) == 72  # 6 min / 5 s
    assert set(series["time_lag_s"]) == {"t0-0", "t0-1", "t0-2"}
    # after 5 s: C0 read 5,000 of t0p0 (t0p1 moved away, paused), C1 5,000 of t0p2
    assert series["total_lag"][0] == 200_000
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_simulate_hours_and_seed_override(tmp_path, capsys):
    scenario = {
        "topics": [{"name": "t", "partitions": 4, "total_rate": 100, "zipf": 1.1}],
        "members": [{"id": "a", "capacity": 80}, {"id": "b", "capacity": 80}],
        "drift_sigma": 0.5,
        "strategy": "oracle",
    }
    path = write(tmp_path, json.dumps(scenario))
    out = tmp_path / "o.json"
    assert main(["simulate", "--scenario", path, "--hours", "0.25", "--seed", "7", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["scenario"]["seed"] == 7 and doc["runs"][0]["summary"]["hours"] == 0.25
    assert "seed 7" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (json.dumps({**WORKED, "members": [{"id": "C0", "capacity": -5}]}), "members[0].capacity"),
        (json.dumps(WORKED).replace('"capacity": 1000}]', '"capacity": NaN}]'), "members[1].capacity"),
        (json.dumps(WORKED).replace('"capacity": 1000}]', '"capacity": Infinity}]'), "members[1].capacity"),
        (
            json.dumps({**WORKED, "topics": [{"name": "t0", "partitions": 2, "rates": [5, -1]}]}),
            "topics[0]: rates[1] must be >= 0",
        ),
        (
            json.dumps({**WORKED, "topics": [{"name": "t0", "partitions": 2, "total_rate": "NaN"}]}),
            "topics[0].total_rate",
        ),
        (json.dumps({**WORKED, "strategy": "quickest"}), "strategy: unknown 'quickest'"),
        ("{not json", "is not valid JSON"),
    ],
)
def test_simulate_refuses_bad_input(tmp_path, capsys, text, expected):
    out = tmp_path / "never.json"
    rc = main(["simulate", "--scenario", write(tmp_path, text), "--json", str(out)])
    err = capsys.readouterr().err
    assert rc == 1
    assert expected in err and err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()


def test_simulate_refuses_unknown_strategy_flag(tmp_path, capsys):
    rc = main(["simulate", "--scenario", write(tmp_path, json.dumps(WORKED)), "--strategy", "range,warp"])
    err = capsys.readouterr().err
    assert rc == 1 and "strategy: unknown 'warp'" in err


def test_simulate_refuses_bad_hours(tmp_path, capsys):
    assert main(["simulate", "--scenario", write(tmp_path, json.dumps(WORKED)), "--hours", "nan"]) == 1
    assert "--hours must be a number > 0" in capsys.readouterr().err
