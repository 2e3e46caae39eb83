"""The static-member registry (library and CLI) on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from rebalance_advisor.cli import main
from rebalance_advisor.domain.decisions import Thresholds
from rebalance_advisor.domain.group_planning import plan_group
from rebalance_advisor.domain.spec_documents import StaticMember, build_group_docs
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.services import static_members
from rebalance_advisor.store import db
from rebalance_advisor.store.static_members_table import static_member_specs

from tests._planner import make_snapshot


def test_add_list_remove(url: str) -> None:
    added = static_members.add("orders", "worker-1", ["orders-in", "orders-retry", "orders-in"], url)
    assert added.topics == ("orders-in", "orders-retry")  # duplicates dropped, order kept
    static_members.add("orders", "worker-0", ["orders-in"], url)
    static_members.add("billing", "b-0", ["billing-in"], url)
    assert [(m.group_id, m.member_id) for m in static_members.list_members(url=url)] == [
        ("billing", "b-0"),
        ("orders", "worker-0"),
        ("orders", "worker-1"),
    ]
    listed = static_members.list_members("orders", url)
    assert [m.member_id for m in listed] == ["worker-0", "worker-1"]
    assert listed[1].topics == ("orders-in", "orders-retry") and listed[1].created_at.tzinfo is not None
    removed = static_members.remove("orders", "worker-1", url)
    assert removed.member_id == "worker-1"
    assert [m.member_id for m in static_members.list_members("orders", url)] == ["worker-0"]
    # what the planner reads is the same registry
    with db.connect(url) as conn:
        assert {(s.group_id, s.member_id) for s in static_member_specs(conn)} == {
            ("billing", "b-0"),
            ("orders", "worker-0"),
        }


def test_registering_twice_and_removing_unknown_are_refused(url: str) -> None:
    static_members.add("orders", "worker-1", ["orders-in"], url)
    with pytest.raises(AdvisorError, match="'worker-1' of group 'orders' is already registered"):
        static_members.add("orders", "worker-1", ["other-topic"], url)
    assert static_members.list_members("orders", url)[0].topics == ("orders-in",)  # unchanged
    with pytest.raises(
        AdvisorError, match="'worker-9' of group 'orders' is not registered; registered: worker-1"
    ):
        static_members.remove("orders", "worker-9", url)
    with pytest.raises(AdvisorError, match="no registered members"):
        static_members.remove("nobody", "worker-1", url)


@pytest.mark.parametrize(
    ("group", "member", "topics", "message"),
    [
        ("", "m", ["t"], "group id must be a non-empty string"),
        ("g", " m", ["t"], "whitespace"),
        ("g", "m", [], "at least one topic"),
        ("g", "m", ["bad topic"], "not a Kafka topic name"),
        ("g", "m", ["x" * 250], "not a Kafka topic name"),
    ],
)
def test_bad_input_is_refused(
    sqlite_url: str, group: str, member: str, topics: list[str], message: str
) -> None:
    db.upgrade(sqlite_url)
    with pytest.raises(AdvisorError, match=message):
        static_members.add(group, member, topics, sqlite_url)
    assert static_members.list_members(url=sqlite_url) == []


def test_planner_plans_a_memberless_group_only_once_members_are_registered() -> None:
    snapshot = make_snapshot({"manual": {"topics": {"data": [(900, 0), (100, 0), (50, 0)]}}})
    (doc,) = build_group_docs(snapshot, [])
    assert doc["members"] == [] and doc["note"].startswith("no members")
    assert plan_group(doc, Thresholds(), datetime.now(UTC)).outcome == "no_members"
    (doc,) = build_group_docs(snapshot, [StaticMember("manual", m, ("data",)) for m in ("w1", "w0")])
    assert [m["member_id"] for m in doc["members"]] == ["w0", "w1"]
    result = plan_group(doc, Thresholds(), datetime.now(UTC))
    assert result.outcome == "recommended"
    assert {m for m, *_ in result.plan.assignments} == {"w0", "w1"}


def test_cli_members(sqlite_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["members", "add", "orders", "w-0", "orders-in", "--db", sqlite_url]) == 0
    assert "registered w-0 in group orders" in capsys.readouterr().out
    assert main(["members", "add", "orders", "w-0", "orders-in", "--db", sqlite_url]) == 1
    assert "already registered" in capsys.readouterr().err
    assert main(["members", "list", "--format", "json", "--db", sqlite_url]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["group_id"], row["member_id"], row["topics"]) == ("orders", "w-0", ["orders-in"])
    assert main(["members", "list", "--db", sqlite_url]) == 0
    assert "orders  w-0     orders-in" in capsys.readouterr().out
    assert main(["members", "remove", "orders", "w-0", "--db", sqlite_url]) == 0
    assert main(["members", "remove", "orders", "w-0", "--db", sqlite_url]) == 1
    assert "is not registered" in capsys.readouterr().err
