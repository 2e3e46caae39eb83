"""The group page lists a ranged plan's key ranges as ``topic-partition [lo, hi) -> member`` (docs/concepts/key-ranges.md)."""

from __future__ import annotations

import html

import pytest
from rebalance_advisor.store import db

from tests.e2e.test_webui_api import _Caller, _client, auth  # noqa: F401
from tests.unit.test_key_range_plan_store import _ranged_plan_id


@pytest.fixture
def url(sqlite_url: str):
    db.upgrade(sqlite_url)
    yield sqlite_url
    db.dispose(sqlite_url)


def test_group_page_lists_key_ranges(url: str, auth: dict[str, str]) -> None:  # noqa: F811
    _, ranges = _ranged_plan_id(url)
    caller = _Caller(_client(url), auth, url)
    page = caller.get("/groups/orders")
    assert page.status_code == 200, page.text[:300]
    text = html.unescape(page.text)
    for member, topic, partition, _lag, lo, hi in ranges:
        assert f"{topic}-{partition} [{lo}, {hi}) → {member}" in text
