"""The ``plan`` command end to end: JSON in, JSON/table out, bad input -> message and exit 1."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from rebalance_advisor.cli import main

from tests._groups import group

WORKED = group([("C0", ["t0"]), ("C1", ["t0"])], {"t0": [100_000, 60_000, 50_000]})


def write(tmp_path: Path, data, name="g.json") -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def test_plan_json_worked_example(tmp_path, capsys):
    assert main(["plan", "--input", write(tmp_path, WORKED), "--strategy", "lag_aware"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["group_id"] == "g" and out["strategy"] == "lag_aware"
    assert out["assignment"] == {"C0": [["t0", 0]], "C1": [["t0", 1], ["t0", 2]]}
    assert out["metrics"]["member_lag"] == {"C0": 100_000, "C1": 110_000}
    assert out["metrics"]["max_member_lag"] == 110_000
    assert out["metrics"]["lower_bound_max_lag"] == 110_000
    assert out["metrics"]["gap"] == 0.0


def test_plan_options_and_empty_members(tmp_path, capsys):
    data = group([("a", ["t0"]), ("b", ["t0"]), ("c", ["t0"])], {"t0": [5]})
    rc = main(
        [
            "plan",
            "--input",
            write(tmp_path, data),
            "--strategy",
            "lag_aware_sticky",
            "--option",
            "move_budget=0",
            "--option",
            "min_gain=auto",
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["assignment"] == {"a": [["t0", 0]], "b": [], "c": []}


def test_plan_table(tmp_path, capsys):
    assert main(["plan", "--input", write(tmp_path, WORKED), "--strategy", "range", "--format", "table"]) == 0
    text = capsys.readouterr().out
    assert "t0-0, t0-1" in text and "160000" in text and "max_member_lag" in text


def test_plan_reads_stdin(monkeypatch, capsys):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(WORKED)))
    assert main(["plan", "--input", "-", "--strategy", "roundrobin"]) == 0
    assert json.loads(capsys.readouterr().out)["assignment"] == {
        "C0": [["t0", 0], ["t0", 2]],
        "C1": [["t0", 1]],
    }


BAD = [
    (group([("a", ["t0"]), ("a", ["t0"])], {"t0": [1]}), "duplicate member id 'a'"),
    (group([("a", ["t0", "t9"])], {"t0": [1]}), "'t9', which has no partitions"),
    (
        group([("a", ["t0"], [("t0", 5)])], {"t0": [1]}),
        "member 'a' owns partition t0-5, which does not exist",
    ),
    (group([("a", ["t0"])], {"t0": [-1]}), "t0-0: lag must be an integer >= 0"),
    (group([("a", ["t0"])], {"t0": [1.5]}), "t0-0: lag must be an integer >= 0"),
    (group([], {"t0": [1]}), "no members"),
    ("{not json", "not valid JSON"),
    (
        {
            "group_id": "g",
            "members": [{"member_id": "a", "topics": ["t0"]}],
            "partitions": [{"topic": "t0", "partition": 0, "lag": 1}] * 2,
        },
        "t0-0 listed twice",
    ),
    (
        {**WORKED, "strategy": "range"},
        "group 'g': unknown key 'strategy' (allowed: group_id, members, partitions, recent_moves, rate_interval_s)",
    ),
    (
        {**WORKED, "members": [{"member_id": "a", "topics": ["t0"], "owend": [["t0", 0]]}]},
        "member 'a': unknown key 'owend' (allowed: member_id, group_instance_id, topics, owned, generation, "
        "capacity)",
    ),
    (
        {**WORKED, "partitions": [{"topic": "t0", "partition": 0, "lag": 1, "leader": 3}]},
        "partitions[0]: unknown key 'leader' (allowed: topic, partition, lag, produce_rate)",
    ),
]


def _rated(rate=1.0, capacity=10.0, moves=None):
    data = {
        "group_id": "g",
        "members": [{"member_id": "a", "topics": ["t0"], "capacity": capacity}],
        "partitions": [{"topic": "t0", "partition": 0, "lag": 1, "produce_rate": rate}],
    }
    if moves is not None:
        data["recent_moves"] = moves
    return data


BAD += [
    (_rated(rate=-1), "partition t0-0: produce_rate must be a finite number >= 0"),
    (_rated(rate=float("nan")), "partition t0-0: produce_rate must be a finite number >= 0"),
    (_rated(rate=float("inf")), "partition t0-0: produce_rate must be a finite number >= 0"),
    (_rated(rate="fast"), "partition t0-0: produce_rate must be a finite number >= 0"),
    (_rated(capacity=0), "member 'a': capacity must be a finite number > 0"),
    (_rated(capacity=float("-inf")), "member 'a': capacity must be a finite number > 0"),
    (_rated(capacity=float("nan")), "member 'a': capacity must be a finite number > 0"),
    (
        _rated(moves=[{"topic": "t0", "partition": 0, "from": "a", "to": "b", "at": "yesterday"}]),
        "recent_moves[0]: at must be an ISO 8601 time",
    ),  # fmt: skip
    ({**_rated(), "rate_interval_s": -60}, "rate_interval_s must be a finite number of seconds > 0 or null"),
    ({**_rated(), "rate_interval_s": "5m"}, "rate_interval_s must be a finite number of seconds > 0 or null"),
]


def test_plan_with_rates_and_capacities(tmp_path, capsys):
    # C0 holds both 1,000/s partitions (2,000 >= capacity 1,500: overloaded); C1 holds 10/s ones.
    data = {
        "group_id": "g",
        "members": [
            {"member_id": "C0", "topics": ["t"], "owned": [["t", 0], ["t", 1]], "capacity": 1500},
            {"member_id": "C1", "topics": ["t"], "owned": [["t", 2], ["t", 3]], "capacity": 1500},
        ],
        "partitions": [
            {"topic": "t", "partition": p, "lag": lag, "produce_rate": rate}
            for p, (lag, rate) in enumerate([(0, 1000), (0, 1000), (4_900, 10), (0, 10)])
        ],
    }
    assert main(["plan", "--input", write(tmp_path, data), "--strategy", "rate_aware"]) == 0
    out = json.loads(capsys.readouterr().out)
    # weights rate + lag/900: 1,000, 1,000, 10 + 4,900/900 = 15.4, 10 -> LPT: t-0 C0, t-1 C1, t-2 C0 (tie:
    # member order), t-3 C1
    assert out["assignment"] == {"C0": [["t", 0], ["t", 2]], "C1": [["t", 1], ["t", 3]]}
    before, after = out["load"]["before"], out["load"]["after"]
    assert before["overloaded"] == 1 and before["max_catch_up_s"] is None  # never: overloaded
    assert before["members"]["inflow"] == [2000.0, 20.0]
    # after: C0 1,010/s with 4,900 backlog: T = 4,900 / (1,500 - 1,010) = 10 s; C1 1,010/s, no backlog
    assert after["overloaded"] == 0 and after["members"]["inflow"] == [1010.0, 1010.0]
    assert after["max_catch_up_s"] == pytest.approx(10.0)
    assert (
        out["advice"]["outcome"] == "recommended" and "overloaded members 1 -> 0" in out["advice"]["reason"]
    )


@pytest.mark.parametrize(("data", "message"), BAD)
def test_bad_input_is_a_message_not_a_traceback(tmp_path, capsys, data, message):
    assert main(["plan", "--input", write(tmp_path, data), "--strategy", "range"]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_bad_strategy_option_and_file(tmp_path, capsys):
    path = write(tmp_path, WORKED)
    assert main(["plan", "--input", path, "--strategy", "nope"]) == 1
    assert main(["plan", "--input", path, "--strategy", "lag_aware", "--option", "lag_scope=cluster"]) == 1
    assert main(["plan", "--input", path, "--strategy", "range", "--option", "x"]) == 1
    assert main(["plan", "--input", str(tmp_path / "missing.json"), "--strategy", "range"]) == 1
    err = capsys.readouterr().err
    assert (
        "unknown strategy 'nope'" in err
        and "lag_scope" in err
        and "key=value" in err
        and "cannot read" in err
    )


@pytest.mark.parametrize("limit", ["0", "-3", "x", str(2**64)])
def test_plans_limit_out_of_range_is_refused_before_the_database(limit, tmp_path, capsys) -> None:
    """``plans --limit`` takes 1 to 1,000,000: a huge one used to reach SQLite and overflow (traceback)."""
    from rebalance_advisor.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["plans", "--limit", limit, "--db", f"sqlite:///{tmp_path / 'none.db'}"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert f"argument --limit: must be a whole number from 1 to 1,000,000, not {limit!r}" in err
    assert not (tmp_path / "none.db").exists()
