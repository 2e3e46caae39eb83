"""The group page and API show what is in force: a manual-assign group's published plan with its
epoch and apply mode, the owners it gave (Kafka lists no ``assign()`` consumers), a standing
recommendation only when it differs from it, and no Approve button on a duplicate of it.

Cheap: plans written by the planner's real write path without Spark (tests/_plans.py), a
hand-made snapshot stored by the store, the app with Airflow's real auth (SQLite only).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._plans import mark_published, record_plan
from tests.e2e.test_webui_api import _Caller, _client, auth  # noqa: F401

pytestmark = [pytest.mark.airflow]

SKEWED = [9000, 500, 400, 300, 200, 100]
OTHER = [100, 200, 300, 400, 500, 9000]


@pytest.fixture
def manual_group(tmp_path: Path) -> tuple[str, int]:
    """A manual-assign group ``manual`` (w0, w1) with plan A published at epoch 3; (url, A)."""
    from rebalance_advisor.services import static_members
    from rebalance_advisor.store import db
    from rebalance_advisor.store.snapshots import write_snapshot

    from tests._planner import make_snapshot

    url = f"sqlite:///{tmp_path / 'advisor.db'}"
    db.upgrade(url)
    snapshot = make_snapshot({"manual": {"topics": {"data": [(lag, 0) for lag in SKEWED]}, "members": []}})
    write_snapshot(snapshot, url)
    for member in ("w0", "w1"):
        static_members.add("manual", member, ["data"], url)
    published = record_plan(url, "manual", ["w0", "w1"], SKEWED)
    mark_published(url, published, epoch=3)
    return url, published


def test_group_page_shows_the_plan_in_force_and_no_approve_on_a_duplicate(manual_group, auth) -> None:  # noqa: F811
    url, published = manual_group
    duplicate = record_plan(url, "manual", ["w0", "w1"], SKEWED)  # a run that arrived at it again
    with _client(url) as client:
        api = _Caller(client, auth)
        data = api.get("/api/groups/manual").json()
        assert data["in_force"]["plan_id"] == published and data["in_force"]["epoch"] == 3
        assert data["in_force"]["apply_mode"] == "static assignments"
        assert data["standing_plan_id"] is None and data["duplicate_plan_ids"] == [duplicate]
        owners = {p["partition"]: p["owner"] for p in data["now"]["partitions"]}
        assert set(owners.values()) == {"w0", "w1"}  # from the plan in force, not unknown
        assert data["now"]["owners_from"] == f"plan #{published} in force (epoch 3)"
        # the busiest partition (9,000) alone on one member, the five others on the other
        assert sorted((o["member"], o["partitions"], o["lag"]) for o in data["owners_now"])[0][1:] in (
            (1, 9000), (5, 1500),
        )  # fmt: skip
        html = api.get("/groups/manual").text
    assert 'id="in-force"' in html and "epoch 3" in html and "static assignments" in html
    assert 'id="approve"' not in html and 'id="standing-plan"' not in html
    assert 'id="duplicate-plan"' in html and f"#{duplicate}" in html
    assert f"Plan #{published} " in html and 'id="static-note"' in html
    # planned when nothing was owned: the unowned lag is shown apart, not a "0 ->" alone
    max_lag = " ".join(html.split('id="plan-max-lag">')[1].split("</span>")[0].split())
    assert (
        max_lag
        == "max member lag 0 (plus 10,500 on partitions no member owns) → 9,000 (every partition owned)"
    )
    assert ">—<" not in html.split('id="partitions"')[1]  # every partition names its owner
    moves = html.split('id="plan-moves">')[1].split("</span>")[0]
    rows = html.split('id="moves"')[1].split("</table>")[0]
    assert ("no partition moves" in rows) == moves.startswith("0 move(s)")


def test_a_differing_recommendation_stands_beside_the_plan_in_force(manual_group, auth) -> None:  # noqa: F811
    url, published = manual_group
    other = record_plan(url, "manual", ["w0", "w1"], OTHER)
    with _client(url) as client:
        api = _Caller(client, auth)
        data = api.get("/api/groups/manual").json()
        html = api.get("/groups/manual").text
    assert data["standing_plan_id"] == other and data["in_force"]["plan_id"] == published
    assert 'id="standing-plan"' in html and f"Plan #{other} " in html
    assert f'data-plan="{other}"' in html and 'id="approve"' in html
    assert 'id="in-force"' in html and "epoch 3" in html


def test_the_api_docs_page_documents_every_endpoint_without_a_cdn(manual_group) -> None:
    url, _ = manual_group
    with _client(url) as client:
        spec = client.get("/rebalance-advisor/openapi.json").json()
        page = client.get("/rebalance-advisor/docs")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    html = page.text
    for path, item in spec["paths"].items():
        for method in item:
            assert f"<code>{method.upper()} {path}</code>" in html, (method, path)
    assert 'id="schema-GroupDetail"' in html and "<code>in_force</code>" in html
    assert "<code>predicted_catch_up_after_s</code>" in html  # a plan's columns, field by field
    assert "cdn" not in html.lower() and "<script src" not in html
