"""The Spark planner ships only DOCUMENT_KEYS of each group document: nothing the planner reads is lost.

``shipped_document`` drops the keys that are for people (``time_lags``, ``rates_note``);
``capacity_sources`` is shipped, since the capacity probe tells estimated from measured capacities by it. Two checks, independent of each other: a document that records every key asked of
it shows that ``plan_group`` asks for nothing outside DOCUMENT_KEYS (present or not), on every path
(planned, memberless, share group, invalid); and a document with the extra keys plans to the same
advice as its shipped copy.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from rebalance_advisor.adapters.spark_planner import shipped_document
from rebalance_advisor.domain.decisions import Thresholds
from rebalance_advisor.domain.group_planning import DOCUMENT_KEYS, plan_group

NOW = datetime(2026, 11, 23, 2, 0, tzinfo=UTC)


class Recording(dict):
    """A dict that notes every key looked up, including keys it does not hold."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.asked: set[str] = set()

    def __getitem__(self, key):
        self.asked.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.asked.add(key)
        return super().get(key, default)

    def __contains__(self, key):
        self.asked.add(key)
        return super().__contains__(key)

    def __iter__(self):  # iterating reads every key: count them all as asked
        self.asked.update(super().keys())
        return super().__iter__()

    def keys(self):
        self.asked.update(super().keys())
        return super().keys()

    def items(self):
        self.asked.update(super().keys())
        return super().items()


def _flagged_doc() -> dict:
    """Two members; m1 holds all four partitions (one overloaded member): every strategy runs."""
    parts = [
        ("t", p, lag, rate) for p, lag, rate in ((0, 9000, 30.0), (1, 5000, 20.0), (2, 10, 5.0), (3, 0, 1.0))
    ]
    return {
        "group_id": "g",
        "members": [
            {
                "member_id": "m1",
                "group_instance_id": None,
                "topics": ["t"],
                "owned": [["t", p] for p in range(4)],
                "capacity": 40.0,
            },
            {"member_id": "m2", "group_instance_id": None, "topics": ["t"], "owned": [], "capacity": 40.0},
        ],
        "partitions": [
            {"topic": t, "partition": p, "lag": lag, "produce_rate": rate} for t, p, lag, rate in parts
        ],
        "weight": "lag",
        "note": None,
        "standing": {"plan_id": 7, "status": "rejected", "created_at": "2026-11-23T00:00:00+00:00"},
        "recent_moves": [
            {"topic": "t", "partition": 3, "from": "m2", "to": "m1", "at": "2026-11-23T01:59:00+00:00"}
        ],
        # for people only: never read by the planner
        "capacity_sources": {"m1": "measured", "m2": "group_median"},
        "time_lags": [{"topic": "t", "partition": p, "seconds": 1.0, "method": "broker"} for p in range(4)],
        "rates_note": None,
    }


DOCS = {
    "planned": _flagged_doc(),
    "memberless": {
        "group_id": "lonely",
        "members": [],
        "partitions": [{"topic": "t", "partition": 0, "lag": 5}],
        "weight": "lag",
        "note": "no members",
        "time_lags": [],
        "capacity_sources": {},
        "rates_note": None,
    },
    "share": {
        "group_id": "s",
        "members": [],
        "partitions": [],
        "broker_assigned": True,
        "note": "share group",
        "time_lags": [],
        "capacity_sources": {},
        "rates_note": None,
    },
    "invalid": {
        "group_id": "bad",
        "members": [{"member_id": "m1", "topics": ["t"]}],
        "partitions": [{"topic": "t", "partition": 0, "lag": -1}],
        "time_lags": [],
    },
}


@pytest.mark.parametrize("name", sorted(DOCS))
def test_the_planner_asks_only_for_document_keys(name):
    doc = Recording(json.loads(json.dumps(DOCS[name])))
    plan_group(doc, Thresholds(), NOW)
    assert doc.asked, "the recorder saw nothing: it cannot tell what the planner reads"
    assert doc.asked <= set(DOCUMENT_KEYS), sorted(doc.asked - set(DOCUMENT_KEYS))


@pytest.mark.parametrize("name", sorted(DOCS))
def test_the_shipped_document_plans_like_the_whole_one(name):
    doc = json.loads(json.dumps(DOCS[name]))
    shipped = json.loads(shipped_document(doc))
    assert "time_lags" not in shipped
    assert shipped.get("capacity_sources") == doc.get("capacity_sources")
    whole = plan_group(doc, Thresholds(), NOW)
    assert plan_group(shipped, Thresholds(), NOW) == whole
    if name == "planned":  # the case must exercise the planner, not fall out early
        assert whole.outcome == "recommended" and whole.plan is not None
