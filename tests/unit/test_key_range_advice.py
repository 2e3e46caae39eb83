"""key_range inside advise_group: a group document with the driver's key samples -> a ranged plan.

Expected values are worked out by hand from the document (lags, sample shares), not read back
from the code under test.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from rebalance_advisor.domain.decisions import Thresholds
from rebalance_advisor.domain.group_planning import plan_group
from rebalance_advisor_client.key_hash import HASH_SPACE, positive_hashes

NOW = datetime(2026, 1, 1, tzinfo=UTC)
KEYS = [f"user-{i}".encode() for i in range(4000)]


def _doc(flagged=("w0", "w1", "w2", "w3"), lag=400_000, with_sharing=True):
    hashes, counts = np.unique(positive_hashes(KEYS), return_counts=True)
    doc = {
        "group_id": "g",
        "members": [
            {"member_id": f"w{i}", "topics": ["hot"], "owned": [["hot", 0]] if i == 0 else []}
            for i in range(4)
        ],
        "partitions": [{"topic": "hot", "partition": 0, "lag": lag}],
    }
    if with_sharing:
        doc["key_sharing"] = {
            "members": list(flagged),
            "samples": [
                {"topic": "hot", "partition": 0, "hashes": hashes.tolist(), "counts": counts.tolist()}
            ],
        }
    return doc


def _thresholds(**extra):
    base = {"strategies": ["lag_aware", "key_range"], "key_sharing": True, "key_sharing_topics": "hot"}
    return Thresholds.parse({**base, **extra})


def test_hot_partition_is_shared_by_four_flagged_members():
    advice = plan_group(_doc(), _thresholds(), NOW)
    assert advice.outcome == "recommended", advice.reason
    plan = advice.plan
    assert plan.strategy == "key_range"
    assert plan.assignments == ()  # the only partition is split
    rows = sorted(plan.key_ranges, key=lambda r: r[4])
    assert [r[4] for r in rows][0] == 0 and rows[-1][5] == HASH_SPACE
    assert all(a[5] == b[4] for a, b in zip(rows, rows[1:], strict=False))  # contiguous, no gap
    assert sorted(r[0] for r in rows) == ["w0", "w1", "w2", "w3"]
    # by hand: each range's lag = 400,000 x its share of the 4,000 sampled keys
    all_hashes = positive_hashes(KEYS)
    for _member, _topic, _partition, lag, lo, hi in rows:
        share = int(((all_hashes >= lo) & (all_hashes < hi)).sum()) / 4000
        assert abs(lag - 400_000 * share) <= 1
        assert 0.24 <= share <= 0.26
    assert sum(r[3] for r in rows) == 400_000
    # the rules saw four members of ~100,000 each, not one of 400,000
    assert plan.metrics.max_member_lag <= 104_000
    assert "key_range: split 1 partition(s) into 4 key ranges" in advice.reason


@pytest.mark.parametrize(
    "doc, thresholds",
    [
        (_doc(flagged=("w0",)), _thresholds()),  # one flagged member: nobody to share with
        (_doc(), _thresholds(key_sharing=False)),  # run level off
        (_doc(), _thresholds(key_sharing_topics="other")),  # topic not allow-listed
        (_doc(with_sharing=False), _thresholds()),  # the driver sampled nothing
    ],
)
def test_nothing_splits_without_all_three_levels(doc, thresholds):
    advice = plan_group(doc, thresholds, NOW)
    assert advice.plan is None or advice.plan.key_ranges == ()


def test_malformed_key_sharing_is_a_group_error_not_a_crash():
    doc = _doc()
    doc["key_sharing"]["samples"][0]["counts"] = [0] * len(doc["key_sharing"]["samples"][0]["counts"])
    advice = plan_group(doc, _thresholds(), NOW)
    assert advice.outcome == "error"
    assert "counts >= 1" in advice.reason


def test_planner_documents_fold_range_groups_into_the_parent():
    from rebalance_advisor.domain.spec_documents import SnapshotTables, StaticMember, build_docs_from_tables

    half = HASH_SPACE // 2
    tables = SnapshotTables(
        offsets={("t", 0): (0, 1000)},
        committed={
            "g": {("t", 0): 100},
            f"g.keyrange.0-{half}": {("t", 0): 500},
            f"g.keyrange.{half}-{HASH_SPACE}": {("t", 0): 300},
        },
        members={"g": [], f"g.keyrange.0-{half}": [], f"g.keyrange.{half}-{HASH_SPACE}": []},
    )
    docs = build_docs_from_tables(tables, [StaticMember("g", "w0", ("t",))])
    assert [d["group_id"] for d in docs] == ["g"]
    # by hand: ranges at 500 and 300 -> partition progress 300 -> lag 1000 - 300 = 700 (= max of 500, 700)
    assert [p["lag"] for p in docs[0]["partitions"]] == [700]


def test_lag_report_folds_ranges_and_lists_one_row_per_range():
    from rebalance_advisor.domain.snapshot_model import CommittedOffset, Group, PartitionOffsets, Snapshot
    from rebalance_advisor.services import lag_report

    half = HASH_SPACE // 2
    lo_group, hi_group = f"g.keyrange.0-{half}", f"g.keyrange.{half}-{HASH_SPACE}"
    snapshot = Snapshot(
        taken_at=NOW,
        bootstrap_servers="x:9092",
        cluster_id=None,
        duration_s=0.1,
        groups=[Group(n, "Empty", "classic", None, None, None) for n in ("g", lo_group, hi_group)],
        partitions=[PartitionOffsets("t", 0, 0, 1000)],
        committed=[
            CommittedOffset("g", "t", 0, 100),
            CommittedOffset(lo_group, "t", 0, 600),
            CommittedOffset(hi_group, "t", 0, 250),
        ],
    )
    grouped = lag_report.rows(snapshot)
    assert list(grouped) == ["g"]  # derived groups folded into their parent
    got = [(r.group, r.current_offset, r.lag) for r in grouped["g"]]
    # by hand: ranges at 600 and 250 -> lags 400 and 750; the parent's lag is the max, 750
    assert got == [("g", 250, 750), (lo_group, 600, 400), (hi_group, 250, 750)]
    text = lag_report.format_tool(grouped)
    assert lo_group in text and hi_group in text


def _ranged_doc(behind):
    """The group after its ranged plan was published: nobody owns hot-0 whole, w0..w3 hold a quarter
    of the hash space each (cuts by hand), each ``behind`` records behind the log end."""
    doc = _doc()
    for member in doc["members"]:
        member["owned"] = []
    quarter = HASH_SPACE // 4
    cuts = [0, quarter, 2 * quarter, 3 * quarter, HASH_SPACE]
    doc["current_ranges"] = [
        {"member_id": f"w{i}", "topic": "hot", "partition": 0, "hash_lo": cuts[i], "hash_hi": cuts[i + 1],
         "behind": b}
        for i, b in enumerate(behind)
    ]  # fmt: skip
    return doc


def test_a_published_ranged_plan_is_the_current_state_not_unowned_lag():
    """The second run after a ranged plan: the split partition is owned by its ranges (no new plan)."""
    doc = _ranged_doc([400_000] * 4)
    advice = plan_group(doc, _thresholds(), NOW)
    assert advice.outcome != "recommended", advice.reason
    assert advice.plan is None
    assert advice.unowned_lag == 0
    # by hand: 4 ranges of a uniform 4,000-key sample, each ~1/4 of 400,000
    assert 96_000 <= advice.current.max_member_lag <= 104_000
    # the same document without its current ranges: the partition counts as unowned and is re-planned
    del doc["current_ranges"]
    again = plan_group(doc, _thresholds(), NOW)
    assert again.outcome == "recommended" and again.unowned_lag == 400_000


def test_a_range_far_behind_is_measured_as_its_member_s_load():
    """Ranges at different progress: a range's lag = how far behind x its share (by hand)."""
    doc = _ranged_doc([400_000, 100_000, 100_000, 100_000])
    advice = plan_group(doc, _thresholds(strategies=["lag_aware"]), NOW)
    all_hashes = positive_hashes(KEYS)
    share0 = int((all_hashes < HASH_SPACE // 4).sum()) / 4000
    assert abs(advice.current.max_member_lag - 400_000 * share0) <= 1


def test_current_ranges_in_the_document_come_from_published_ranges_and_range_commits():
    from rebalance_advisor.domain.spec_documents import SnapshotTables, StaticMember, build_docs_from_tables

    half = HASH_SPACE // 2
    tables = SnapshotTables(
        offsets={("t", 0): (0, 1000)},
        committed={
            "g": {("t", 0): 100},
            f"g.keyrange.0-{half}": {("t", 0): 500},
            f"g.keyrange.{half}-{HASH_SPACE}": {("t", 0): 300},
        },
        members={"g": [], f"g.keyrange.0-{half}": [], f"g.keyrange.{half}-{HASH_SPACE}": []},
    )
    registry = [StaticMember("g", "a", ("t",)), StaticMember("g", "b", ("t",))]
    published = {"g": [("a", "t", 0, 0, half), ("b", "t", 0, half, HASH_SPACE), ("gone", "t", 0, 0, half)]}
    (doc,) = build_docs_from_tables(tables, registry, published_ranges=published)
    # by hand: a's range committed 500 -> 500 behind, b's 300 -> 700; an unregistered member is left out
    assert [(r["member_id"], r["hash_lo"], r["behind"]) for r in doc["current_ranges"]] == [
        ("a", 0, 500),
        ("b", half, 700),
    ]
    assert all(m["owned"] == [] for m in doc["members"])


def test_a_group_filter_takes_the_derived_range_groups_of_the_groups_it_selects():
    """``snapshot --groups app``: app's range groups are part of app's lag (folded), so they come along."""
    from rebalance_advisor.adapters.kafka_snapshot import GroupFilter

    picked = GroupFilter.parse("app")
    assert picked.accepts("app") and picked.accepts(f"app.keyrange.0-{HASH_SPACE}")
    assert not picked.accepts(f"other.keyrange.0-{HASH_SPACE}") and not picked.accepts("app.keyrange.x")
    dropped = GroupFilter.parse(None, "app")
    assert not dropped.accepts(f"app.keyrange.0-{HASH_SPACE}") and dropped.accepts("other")
