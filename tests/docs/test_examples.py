"""The docs' examples, run: every file under docs/examples/ is included into a page and exercised here.

Expected values are worked out by hand from the example's own numbers (the proposal's worked
example, the scenario's capacities), not copied from the code's output. The site itself is built
with ``mkdocs build --strict`` by ``make docs-check`` (part of ``make test``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"
BIN = Path(sys.executable).parent


def _run(script: Path | str, env: dict[str, str] | None = None, timeout: float = 300, **kwargs) -> str:
    """Run a docs shell example with the venv's bin on PATH; its stdout (fails with its stderr)."""
    full_env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **(env or {})}
    result = subprocess.run(
        ["bash", "-c", script] if isinstance(script, str) else ["bash", str(script)],
        capture_output=True, text=True, env=full_env, timeout=timeout, cwd=ROOT, **kwargs,
    )  # fmt: skip
    assert result.returncode == 0, f"{script} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _json_lines(output: str) -> list[dict]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def _shape(value: object) -> object:
    """The keys of a JSON document, recursively (lists by their first element)."""
    if isinstance(value, dict):
        return {key: _shape(item) for key, item in value.items()}
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return [_shape(value[0])]
    return None


# -- plan and simulate: no broker ------------------------------------------------------------------


def test_plan_example_gives_the_worked_example_and_the_documented_shape() -> None:
    output = _run(EXAMPLES / "plan" / "run.sh")
    first, sticky = _json_lines(output)
    # The proposal's worked example: lag_aware gives C0 t0-0 (100,000), C1 t0-1 and t0-2 (110,000).
    assert first["assignment"] == {"C0": [["t0", 0]], "C1": [["t0", 1], ["t0", 2]]}
    assert first["metrics"]["member_lag"] == {"C0": 100000, "C1": 110000}
    # C0: 250/s in against 1,500 -> 100,000 / 1,250 = 80 s. C1: the group's medians, 2 x 250/s in
    # against 1,500 -> 110,000 / 1,000 = 110 s.
    after = first["load"]["after"]["members"]
    assert after["inflow"] == [250.0, 500.0] and after["capacity"] == [1500.0, 1500.0]
    assert after["catch_up_s"] == [pytest.approx(80.0), pytest.approx(110.0)]
    assert first["load"]["before"]["unowned_backlog"] == 60000 + 50000
    assert first["advice"]["outcome"] == "recommended"
    assert "C1               2  110000  t0-1, t0-2" in output
    assert sticky["strategy"] == "rate_aware_sticky" and sticky["assignment"]["C0"] == [["t0", 0]]
    documented = json.loads((EXAMPLES / "plan" / "output.json").read_text())
    assert _shape(first) == _shape(documented), "docs/examples/plan/output.json is not the output's shape"
    for key in ("assignment", "metrics"):
        assert documented[key] == first[key], f"the documented output's {key} is stale"


@pytest.mark.parametrize(
    "strategy, member_lag",
    [("range", {"C0": 160000, "C1": 50000}), ("roundrobin", {"C0": 150000, "C1": 60000})],
)
def test_plan_example_with_kafka_assignors(strategy: str, member_lag: dict[str, int]) -> None:
    """docs/concepts/strategies.md, "The worked example": range and Kafka's real roundrobin."""
    output = _run(f"rebalance-advisor plan --input docs/examples/plan/group.json --strategy {strategy}")
    assert _json_lines(output)[0]["metrics"]["member_lag"] == member_lag


@pytest.mark.slow
def test_simulation_example_is_overloaded_while_c1_is_away(tmp_path: Path) -> None:
    """c1 leaves for 1,800 s of the 6 h: c0 alone (3,000/s) cannot carry about 6,000/s."""
    output = _run(EXAMPLES / "simulate" / "run.sh", env={"OUT": str(tmp_path)})
    assert "rate_aware" in output
    runs = json.loads((tmp_path / "drain.json").read_text())["runs"]
    assert [run["strategy"] for run in runs] == ["rate_aware", "oracle", "range"]
    assert (tmp_path / "drain.png").stat().st_size > 0
    for run in runs:
        summary = run["summary"]
        assert summary["hours"] == 6
        # 1,800 s of 21,600 s, less two 30 s samples at the edges.
        assert summary["overloaded_share"] >= (1800 - 60) / 21600, run["strategy"]


# -- the plan table ------------------------------------------------------------------------------------


@pytest.mark.postgres
def test_plan_table_queries_on_both_databases(url: str) -> None:
    import sqlalchemy as sa

    from tests._plans import record_plan

    record_plan(url, "orders", ["worker-1", "worker-2"], [100000, 60000, 50000], topic="orders-in")
    text = "\n".join(
        line for line in (EXAMPLES / "plan-table.sql").read_text().splitlines() if not line.startswith("--")
    )
    statements = [s.strip() for s in text.split(";") if s.strip()]
    assert len(statements) == 3
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            latest, imbalanced, standing = (conn.execute(sa.text(s)).fetchall() for s in statements)
    finally:
        engine.dispose()
    # Two members own nothing yet: all three partitions are handovers; the best max member lag of
    # lags 100,000 / 60,000 / 50,000 over two members is 60,000 + 50,000.
    (row,) = [r for r in latest if r.group_id == "orders"]
    assert (row.status, row.max_lag_after, row.moves) == ("recommended", 110000, 3)
    assert [(r.group_id, r.outcome) for r in imbalanced] == [("orders", "recommended")]
    # nothing owned before: all 210,000 of lag is unowned, none after; no rates, so no load prediction
    (plan,) = standing
    assert (plan.max_lag_before, plan.unowned_lag_before, plan.max_lag_after, plan.unowned_lag_after) == (
        0, 210_000, 110_000, 0,
    )  # fmt: skip
    assert plan.group_max_time_lag_s is None  # no snapshot holds the group's time lags


# -- CLI scripts against a real broker ---------------------------------------------------------------


@pytest.mark.kafka
@pytest.mark.slow
def test_local_broker_script(tmp_path: Path) -> None:
    """docs/getting-started.md: fetch, start on a port, status, consumer-groups, stop."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"REBALANCE_ADVISOR_HOME": str(tmp_path), "PORT": str(port)}
    if "REBALANCE_ADVISOR_CACHE" not in os.environ:
        env["REBALANCE_ADVISOR_CACHE"] = str(Path.home() / ".rebalance-advisor" / "cache")
    try:
        output = _run(EXAMPLES / "local-broker.sh", env=env)
    finally:
        _run("rebalance-advisor dev kafka stop || true", env=env)
    assert f"127.0.0.1:{port}" in output
    with socket.socket() as s:  # stopped: nothing listens any more
        assert s.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.kafka
def test_static_members_script(kafka_bootstrap: str, sqlite_url: str) -> None:
    """docs/protocol/static-groups.md: register, approve, publish, show, reject, remove."""
    import sqlalchemy as sa
    from rebalance_advisor.store import db

    from tests._plans import record_plan

    group = f"orders-{uuid.uuid4().hex[:8]}"  # the script's `orders`, unique on the shared broker
    script = re.sub(r"\borders(?![-\w])", group, (EXAMPLES / "static-members.sh").read_text())
    db.upgrade(sqlite_url)
    plan = record_plan(sqlite_url, group, ["worker-1"], [500, 300], topic="orders-in")
    other = record_plan(sqlite_url, f"{group}-eu", ["worker-9"], [500, 300], topic="orders-in")
    env = {"PLAN": str(plan), "OTHER_PLAN": str(other), "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    output = _run(script, env={**env, "REBALANCE_ADVISOR_DB_URL": sqlite_url})
    assert "worker-1" in output
    engine = sa.create_engine(sqlite_url)
    try:
        with engine.connect() as conn:
            statuses = dict(conn.execute(sa.text("SELECT id, status FROM plans")).fetchall())
            registered = conn.execute(sa.text("SELECT COUNT(*) FROM static_members")).scalar()
    finally:
        engine.dispose()
    assert statuses == {plan: "published", other: "rejected"}
    assert registered == 0  # removed again at the end
