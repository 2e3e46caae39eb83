"""``rebalance-advisor advise`` and ``plans`` end to end: real Spark (local[1]) on a stored snapshot
of the demo groups (tests._planner's hand-checked copies), then the plan table as csv and json."""

from __future__ import annotations

import csv
import io
import json

import pytest
from rebalance_advisor import store
from rebalance_advisor.cli import main

from tests._planner import BALANCED, IDLE, KIP, MANUAL, make_snapshot, stop_spark

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DEMO = {"kip-example": KIP, "idle-group": IDLE, "balanced-group": BALANCED, "manual-assign": MANUAL}


def test_advise_then_plans_csv_and_json(sqlite_url, capsys):
    store.upgrade(sqlite_url)
    snapshot_id = store.write_snapshot(make_snapshot(DEMO), sqlite_url)
    stop_spark()  # `advise` starts (and stops) its own local[1] session; none shared may be alive
    assert main(["advise", "--db", sqlite_url, "--master", "local[1]"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"snapshot {snapshot_id}: 4 groups, 1 flagged (advisor run ")
    kip_line = next(line for line in out.splitlines() if line.startswith("kip-example"))
    assert "recommended" in kip_line and "160,000 -> 110,000" in kip_line and "lag_aware" in kip_line

    assert main(["plans", "--db", sqlite_url, "--format", "csv", "--group", "kip-example"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["group_id"], r["strategy"], r["status"]) for r in rows] == [
        ("kip-example", "lag_aware", "recommended")
    ]
    assert (rows[0]["max_lag_before"], rows[0]["max_lag_after"], rows[0]["moves"]) == (
        "160000",
        "110000",
        "1",
    )

    assert main(["plans", "--db", sqlite_url, "--format", "json", "--group", "kip-example"]) == 0
    (plan,) = json.loads(capsys.readouterr().out)
    assert (plan["id"], plan["strategy"], plan["status"]) == (int(rows[0]["id"]), "lag_aware", "recommended")
    assert (plan["max_lag_before"], plan["max_lag_after"], plan["moves"]) == (160_000, 110_000, 1)

    assert main(["plans", "--db", sqlite_url, "--format", "json", "--group", "idle-group"]) == 0
    assert json.loads(capsys.readouterr().out) == []
