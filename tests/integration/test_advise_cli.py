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


def test_a_group_filter_matching_nothing_is_a_warning(sqlite_url, capsys):
    """The run succeeds (nothing to plan is not an error) but says the filter matched no group."""
    store.upgrade(sqlite_url)
    snapshot_id = store.write_snapshot(make_snapshot(DEMO), sqlite_url)
    stop_spark()
    assert main(["advise", "--db", sqlite_url, "--master", "local[1]", "--groups", "no-such-.*"]) == 0
    said = capsys.readouterr()
    assert said.out.startswith(f"snapshot {snapshot_id}: 0 groups")
    assert said.err == (
        f"rebalance-advisor: warning: the group filter 'no-such-.*' matches no group of snapshot {snapshot_id}: "
        "nothing was planned; the regex must fully match a group id (RE2 syntax)\n"
    )
    # refused before Spark starts, with the same one-line message the DAG's first task fails with
    assert main(["advise", "--db", sqlite_url, "--groups", "(?!test-).*"]) == 1
    assert "invalid group regex '(?!test-).*'" in capsys.readouterr().err
