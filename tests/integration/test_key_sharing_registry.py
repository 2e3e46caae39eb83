"""The per-member key-sharing opt-in in the static-member registry (domain/assignors/key_range.py), SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from rebalance_advisor.cli import main
from rebalance_advisor.services import static_members
from rebalance_advisor.store import db, static_members_table


def test_share_keys_flag_is_stored_and_read(url: str) -> None:
    static_members.add("orders", "w-0", ["orders-in"], url, share_keys=True)
    static_members.add("orders", "w-1", ["orders-in"], url)
    static_members.add("billing", "b-0", ["billing-in"], url, share_keys=True)
    assert [(m.member_id, m.share_keys) for m in static_members.list_members("orders", url)] == [
        ("w-0", True),
        ("w-1", False),
    ]
    with db.connect(url) as conn:
        assert static_members_table.key_sharing_members(conn, "orders") == frozenset({"w-0"})
        assert static_members_table.key_sharing_members(conn, "nobody") == frozenset()


def test_cli_members_add_share_keys(sqlite_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["members", "add", "orders", "w-0", "orders-in", "--share-keys", "--db", sqlite_url]) == 0
    assert "registered w-0 in group orders (topics: orders-in, shares keys)" in capsys.readouterr().out
    assert main(["members", "add", "orders", "w-1", "orders-in", "--db", sqlite_url]) == 0
    capsys.readouterr()
    assert main(["members", "list", "--format", "json", "--db", sqlite_url]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["member_id"], r["share_keys"]) for r in rows] == [("w-0", True), ("w-1", False)]
    assert main(["members", "list", "--db", sqlite_url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["GROUP", "MEMBER", "TOPICS", "SHARE_KEYS", "REGISTERED"]
    assert lines[1].split()[:4] == ["orders", "w-0", "orders-in", "yes"]
    assert lines[2].split()[:4] == ["orders", "w-1", "orders-in", "no"]


def test_migration_keeps_existing_members_as_not_sharing(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    db.upgrade(url, "0002_plans")
    with db.connect(url) as conn:
        conn.execute(
            sa.text(
                "INSERT INTO static_members (group_id, member_id, topics, created_at) VALUES (:g, :m, :t, :c)"
            ),
            {"g": "orders", "m": "old", "t": '["orders-in"]', "c": datetime.now(UTC)},
        )
    db.upgrade(url)
    assert [(m.member_id, m.share_keys) for m in static_members.list_members("orders", url)] == [
        ("old", False)
    ]
    from alembic import command

    with db.connect(url) as conn:  # and back down: the column goes, the member stays
        command.downgrade(db._alembic_config(conn), "0002_plans")
    with db.connect(url) as conn:
        cols = [c["name"] for c in sa.inspect(conn).get_columns("static_members")]
        assert "share_keys" not in cols
        assert conn.execute(sa.text("SELECT member_id FROM static_members")).scalars().all() == ["old"]
    db.dispose(url)
