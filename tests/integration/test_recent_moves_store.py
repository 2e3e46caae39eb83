"""Recent moves on production's path (SQLite and PostgreSQL): two plans published for a manual-assign
group, two snapshots of a group the broker lists with members, the planner's reader, the documents.

Expected moves are computed here from what the store says was published (``published_assignments``
after each publication) and from the hand-made snapshots' owners, not from the code under test.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

from rebalance_advisor import store
from rebalance_advisor.domain.snapshot_model import (
    CommittedOffset,
    Group,
    GroupMemberSnapshot,
    PartitionOffsets,
    Snapshot,
)
from rebalance_advisor.domain.spec_documents import build_docs_from_tables
from rebalance_advisor.services import static_members
from rebalance_advisor.store import db
from rebalance_advisor.store.planner_inputs import read_planner_inputs
from rebalance_advisor.store.plans import published_assignments

from tests._plans import mark_published, record_plan


def _snapshot(taken_at: datetime, dyn_owners: dict[int, str], group: str, topic: str) -> Snapshot:
    members = tuple(
        GroupMemberSnapshot(m, "client", "/127.0.0.1", None, None, ("d",),
                            tuple(("d", p) for p, o in sorted(dyn_owners.items()) if o == m), i)
        for i, m in enumerate(("n1", "n2"))
    )  # fmt: skip
    ends = {("d", 0): 1000, ("d", 1): 1000, **{(topic, p): 1000 for p in range(4)}}
    return Snapshot(
        taken_at=taken_at,
        bootstrap_servers="hand-made:9092",
        cluster_id="c-moves",
        duration_s=0.1,
        groups=[Group("dyn", "stable", "classic", "range", 1, "h:1", members)],
        committed=[CommittedOffset("dyn", "d", p, 900) for p in range(2)]
        + [CommittedOffset(group, topic, p, 900) for p in range(4)],
        partitions=[PartitionOffsets(t, p, 0, e, 1) for (t, p), e in sorted(ends.items())],
    )


def _owners(assignment: dict[str, list[tuple[str, int]]]) -> dict[tuple[str, int], str]:
    return {tp: member for member, parts in assignment.items() for tp in parts}


def test_recent_moves_after_two_published_plans_and_an_observed_change(db_url) -> None:
    url = db_url
    store.upgrade(url)
    group, topic = f"asg-{uuid.uuid4().hex[:8]}", "data"
    for member in ("m1", "m2"):
        static_members.add(group, member, [topic], url)
    first = record_plan(url, group, ["m1", "m2"], [9000, 500, 400, 300], topic=topic)
    mark_published(url, first, 1)
    with db.connect(url) as conn:
        before = _owners(published_assignments(conn)[group])
    second = record_plan(url, group, ["m1", "m2"], [300, 400, 500, 9000], topic=topic)
    mark_published(url, second, 2)
    with db.connect(url) as conn:
        after = _owners(published_assignments(conn)[group])
    expected = {
        (t, p, before[(t, p)], after[(t, p)]) for (t, p) in after if before.get((t, p)) != after[(t, p)]
    }
    assert expected, (before, after)  # the two plans differ
    time.sleep(0.01)
    now = datetime.now(UTC)
    store.write_snapshot(_snapshot(now - timedelta(seconds=60), {0: "n1", 1: "n2"}, group, topic), url)
    last = store.write_snapshot(_snapshot(now, {0: "n2", 1: "n2"}, group, topic), url)
    with db.connect(url) as conn:
        inputs = read_planner_inputs(conn, last)
    docs = {
        d["group_id"]: d
        for d in build_docs_from_tables(inputs.tables, inputs.registry, published=inputs.published)
    }
    store.db.dispose(url)
    moves = {(m["topic"], m["partition"], m["from"], m["to"]) for m in docs[group]["recent_moves"]}
    assert moves == expected
    assert [(m["topic"], m["partition"], m["from"], m["to"]) for m in docs["dyn"]["recent_moves"]] == [
        ("d", 0, "n1", "n2")
    ]
    assert datetime.fromisoformat(docs["dyn"]["recent_moves"][0]["at"]) == now
