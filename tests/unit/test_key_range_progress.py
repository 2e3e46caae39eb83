"""Range progress rules (client package, pure): derived group names, the max rule across
re-cuts, and the fold into the parent group. The exactness claim (no record processed twice or
skipped, per-key order kept) is checked by simulating a partition through random splits and merges,
with each record's fate tracked one by one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rebalance_advisor_client.key_hash import HASH_SPACE
from rebalance_advisor_client.key_ranges import (
    HashProgress,
    fold_range_commits,
    parse_range_group,
    range_group,
    range_lags,
)


def test_derived_group_names_round_trip_and_reject_others():
    assert range_group("orders", 0, 536870912) == "orders.keyrange.0-536870912"
    assert parse_range_group("orders.keyrange.0-536870912") == ("orders", 0, 536870912)
    assert parse_range_group("a.keyrange.b.keyrange.5-9") == ("a.keyrange.b", 5, 9)
    for other in [
        "orders",
        "orders.keyrange.",
        "orders.keyrange.9-5",
        "orders.keyrange.01-5",
        ".keyrange.0-5",
        f"o.keyrange.0-{HASH_SPACE + 1}",
        "o.keyrange.-1-5",
    ]:
        assert parse_range_group(other) is None, other
    with pytest.raises(ValueError):
        range_group("g", 5, 5)


def test_max_rule_and_starts_by_hand():
    half, quarter = HASH_SPACE // 2, HASH_SPACE // 4
    # whole owner reached 100; then split in halves: low half reached 150, high half 120;
    # then a stale commit of an older quarter range at 90 (less than the parent: ignored by max)
    p = HashProgress.from_commits(100, {(0, half): 150, (half, HASH_SPACE): 120, (quarter, half): 90})
    assert p.at(np.array([0, quarter, half - 1, half, HASH_SPACE - 1])).tolist() == [150, 150, 150, 120, 120]
    assert p.start() == 120 and p.start(0, half) == 150 and p.start(quarter, half + 1) == 120
    mask = p.already_done(np.array([5, half + 5, half + 5]), np.array([149, 119, 120]))
    assert mask.tolist() == [True, True, False]
    assert HashProgress.from_commits(None, {(0, half): 7}).start() == -1  # upper half: nothing known


def test_fold_into_parent_and_range_lags():
    half = HASH_SPACE // 2
    committed = {
        "orders": {("t", 0): 100, ("t", 1): 40},
        f"orders.keyrange.0-{half}": {("t", 0): 150},
        f"orders.keyrange.{half}-{HASH_SPACE}": {("t", 0): 120},
        "solo.keyrange.0-10": {("u", 0): 9},  # covers 10 hashes only, parent never committed
        "billing": {("b", 0): 5},
    }
    assert fold_range_commits(committed) == {
        "orders": {("t", 0): 120, ("t", 1): 40},
        "billing": {("b", 0): 5},
        "solo": {},
    }
    lags = range_lags(200, 100, {(0, half): 150, (half, HASH_SPACE): 120})
    assert lags == {(0, half): 50, (half, HASH_SPACE): 80}
    assert max(lags.values()) == 200 - 120  # parent lag = max over ranges = end - folded progress


@st.composite
def histories(draw):
    n_keys = draw(st.integers(1, 12))
    key_hash = draw(st.lists(st.integers(0, HASH_SPACE - 1), min_size=n_keys, max_size=n_keys))
    records = draw(st.lists(st.integers(0, n_keys - 1), min_size=1, max_size=60))
    layouts = []
    for _ in range(draw(st.integers(1, 6))):
        cuts = sorted(set(draw(st.lists(st.integers(1, HASH_SPACE - 1), max_size=4))))
        bounds = [0, *cuts, HASH_SPACE]
        # each range's owner processes up to a random offset and commits (outputs and offsets in
        # one transaction, as the fenced helper does), or crashes before committing
        progress = [draw(st.one_of(st.none(), st.integers(0, len(records)))) for _ in bounds[1:]]
        layouts.append((list(zip(bounds, bounds[1:], strict=False)), progress))
    return key_hash, records, layouts


@settings(deadline=None)
@given(histories())
def test_splits_and_merges_process_each_record_once_in_key_order(history):
    key_hash, records, layouts = history
    hashes = np.array([key_hash[k] for k in records], dtype=np.int64)
    offsets = np.arange(len(records))
    commits: dict[tuple[int, int], int] = {}  # derived group per range (its latest commit)
    processed: list[int] = []  # record offsets, in processing order
    for ranges, stop_at in [*layouts, ([(0, HASH_SPACE)], [len(records)])]:  # end: one owner drains all
        for (lo, hi), stop in zip(ranges, stop_at, strict=True):
            progress = HashProgress.from_commits(None, commits)
            start = max(progress.start(lo, hi), 0)
            end = len(records) if stop is None else max(stop, start)
            mine = (hashes >= lo) & (hashes < hi) & (offsets >= start) & (offsets < end)
            todo = mine & ~progress.already_done(hashes, offsets)
            if stop is not None:  # outputs and position committed together (one transaction)
                processed += offsets[todo].tolist()
                commits[lo, hi] = max(commits.get((lo, hi), -1), end)
            # None: crashed before committing; its transaction aborts, its work counts for nothing
    # each record exactly once; per key in offset order
    assert sorted(processed) == list(range(len(records)))
    for k in set(records):
        seq = [o for o in processed if records[o] == k]
        assert seq == sorted(seq)
