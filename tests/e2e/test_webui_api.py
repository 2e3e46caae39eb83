"""The UI plugin's JSON API and pages against real planner output, with Airflow's real auth.

The app under test is mounted exactly as Airflow mounts plugin apps (``/rebalance-advisor``) next
to SimpleAuthManager's own ``/auth`` app, so tokens come from the real ``POST /auth/token`` with
the generated passwords of an ``admin`` and a ``viewer`` user. The database holds two real
snapshots of the demo workload, each planned by the real Spark planner (tests/support/planned_demo).
Airflow is imported lazily (after the ``airflow_home`` fixture), as that fixture requires.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from tests.support.planned_demo import PlannedDb, copy_of, planned_demo_db  # noqa: F401

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.airflow, pytest.mark.slow]

PREFIX = "/rebalance-advisor"
USERS = "admin:admin,viewer:viewer,operator:user"


@pytest.fixture(scope="module")
def auth(airflow_home: Path) -> Iterator[dict[str, str]]:
    """SimpleAuthManager with three users; their bearer tokens from the real /auth/token route."""
    import os

    os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] = USERS
    os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"] = str(airflow_home / "passwords.json")
    from airflow.api_fastapi.app import init_auth_manager
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    manager = init_auth_manager()
    passwords = json.loads((airflow_home / "passwords.json").read_text())
    host = FastAPI()
    host.mount("/auth", manager.get_fastapi_app())
    with TestClient(host) as client:
        tokens = {}
        for user in ("admin", "viewer", "operator"):
            r = client.post("/auth/token", json={"username": user, "password": passwords[user]})
            assert r.status_code == 201, r.text
            tokens[user] = r.json()["access_token"]
    yield tokens
    os.environ.pop("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", None)


def _client(url: str):
    """Airflow's layout: the plugin app under its prefix, the auth manager's app under /auth."""
    from airflow.api_fastapi.app import get_auth_manager
    from fastapi import FastAPI
    from fastapi.testclient import TestClient
    from rebalance_advisor.webui import create_app

    host = FastAPI()
    host.mount("/auth", get_auth_manager().get_fastapi_app())
    host.mount(PREFIX, create_app(lambda: url))
    return TestClient(host)


@pytest.fixture
def api(planned_demo_db: PlannedDb, auth: dict[str, str]):  # noqa: F811
    """GET/POST helper on the shared planned database, as ``admin`` unless told otherwise."""
    with _client(planned_demo_db.url) as client:
        yield _Caller(client, auth)


@pytest.fixture
def writable_api(
    request: pytest.FixtureRequest,
    planned_demo_db: PlannedDb,  # noqa: F811
    auth: dict[str, str],
    tmp_path: Path,
):
    """Like ``api`` on a private copy of the database (for approve/reject)."""
    url = copy_of(request, planned_demo_db, tmp_path)
    with _client(url) as client:
        yield _Caller(client, auth, url)


class _Caller:
    def __init__(self, client, tokens: dict[str, str], url: str | None = None) -> None:
        self.client = client
        self.tokens = tokens
        self.url = url

    def _headers(self, user: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[user]}"} if user else {}

    def get(self, path: str, user: str | None = "admin", **kwargs):
        return self.client.get(PREFIX + path, headers=self._headers(user), follow_redirects=False, **kwargs)

    def post(self, path: str, user: str | None = "admin", **kwargs):
        return self.client.post(PREFIX + path, headers=self._headers(user), **kwargs)


def _kip_plan_id(api: _Caller) -> int:
    groups = {g["group_id"]: g for g in api.get("/api/groups").json()["groups"]}
    plan_id = groups["kip-example"]["latest_plan_id"]
    assert plan_id is not None
    return plan_id


# ------------------------------------------------------------------------------------------ reads


def test_groups_show_demo_imbalance_and_outcomes(api: _Caller, planned_demo_db: PlannedDb) -> None:  # noqa: F811
    r = api.get("/api/groups")
    assert r.status_code == 200, r.text
    data = r.json()
    assert data["snapshot"]["id"] == planned_demo_db.snapshot_ids[-1]
    groups = {g["group_id"]: g for g in data["groups"]}
    kip = groups["kip-example"]
    # range gave C0 100k+60k and C1 50k: max 160,000 over a mean of 105,000
    assert kip["total_lag"] == 210_000
    assert kip["max_member_lag"] == 160_000
    assert kip["imbalance"] == pytest.approx(160_000 / 105_000, rel=1e-4)
    # the second run found the first run's plan still standing (cool-down), so it recommended nothing new
    assert kip["flagged"] is True and kip["outcome"] == "held_by_cooldown" and "cool-down" in kip["reason"]
    assert kip["latest_plan_status"] == "recommended" and kip["members"] == 2
    assert groups["idle-group"]["outcome"] == "idle" and groups["idle-group"]["flagged"] is False
    assert groups["balanced-group"]["outcome"] == "balanced"
    assert groups["kip848-group"]["type"] == "consumer"
    # default order: most imbalanced first, unplanned groups last
    imbalances = [g["imbalance"] for g in data["groups"] if g["imbalance"] is not None]
    assert imbalances == sorted(imbalances, reverse=True)


def test_groups_filter_and_sort(api: _Caller) -> None:
    flagged = api.get("/api/groups", params={"flagged": "true"}).json()["groups"]
    assert flagged and all(g["flagged"] for g in flagged)
    assert "kip-example" in {g["group_id"] for g in flagged}
    assert "idle-group" not in {g["group_id"] for g in flagged}
    by_id = api.get("/api/groups", params={"sort": "group_id", "order": "asc"}).json()["groups"]
    assert [g["group_id"] for g in by_id] == sorted(g["group_id"] for g in by_id)
    only = api.get("/api/groups", params={"q": "KIP", "type": "classic"}).json()["groups"]
    assert [g["group_id"] for g in only] == ["kip-example"]
    idle = api.get("/api/groups", params={"outcome": "idle"}).json()["groups"]
    assert {g["group_id"] for g in idle} >= {"idle-group"}


def test_group_detail_now_plans_and_history(api: _Caller, planned_demo_db: PlannedDb) -> None:  # noqa: F811
    r = api.get("/api/groups/kip-example")
    assert r.status_code == 200, r.text
    g = r.json()
    members = {m["label"]: m for m in g["now"]["members"]}
    assert set(members) == {"C0", "C1"}
    assert sorted(m["lag"] for m in members.values()) == [50_000, 160_000]
    assert sorted(m["partitions"] for m in members.values()) == [1, 2]
    lags = {(p["topic"], p["partition"]): p["lag"] for p in g["now"]["partitions"]}
    assert lags == {("t0", 0): 100_000, ("t0", 1): 60_000, ("t0", 2): 50_000}
    assert [p["snapshot_id"] for p in g["imbalance_history"]] == list(planned_demo_db.snapshot_ids)
    assert all(p["imbalance"] == pytest.approx(160 / 105, rel=1e-4) for p in g["imbalance_history"])
    statuses = [p["status"] for p in g["plans"]]
    # the second run kept the first plan (cool-down) and stored no plan of its own, only its outcome
    assert statuses == ["recommended"], statuses
    assert g["plans"][0]["max_lag_after"] == 110_000  # KAFKA-5337: C0 gets 100k, C1 60k+50k


def test_plan_detail_has_assignment_diff_and_member_lag(api: _Caller) -> None:
    plan_id = _kip_plan_id(api)
    r = api.get(f"/api/plans/{plan_id}")
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["plan"]["group_id"] == "kip-example" and d["plan"]["status"] == "recommended"
    members = {m["label"]: m for m in d["members"]}
    assert {k: (m["lag_before"], m["lag_after"]) for k, m in members.items()} == {
        "C0": (160_000, 100_000),
        "C1": (50_000, 110_000),
    }
    assert len(d["assignments"]) == 3
    assert [(m["topic"], m["partition"], m["from_label"], m["to_label"]) for m in d["moves"]] == [
        ("t0", 1, "C0", "C1")
    ]
    assert d["plan"]["moves"] == len(d["moves"])
    assert d["transitions"][0]["to_status"] == "recommended"


def test_manual_assign_baseline_is_the_published_plan(airflow_home: Path) -> None:
    """No live members in the snapshot: the diff and the "now" bars are what the planner measured
    against (the group's published plan, plan.metrics.before), not "everything unowned"."""
    from rebalance_advisor.store.plan_records import PlanAssignmentRecord, PlanRecord
    from rebalance_advisor.webui.queries import baseline_owners, member_comparison
    from rebalance_advisor.webui.schemas import MemberNow, NowView, PartitionNow

    def partition(p: int, owner: str | None) -> PartitionNow:
        return PartitionNow(topic="m", partition=p, log_start_offset=0, log_end_offset=0, committed_offset=None,
                            lag=0, owner=owner)  # fmt: skip

    now = NowView(members=[], partitions=[partition(p, None) for p in range(3)])
    published = {"worker-0": [("m", 0), ("m", 1)], "worker-1": [("m", 2)]}
    plan = PlanRecord(
        id=1, run_id=1, snapshot_id=1, group_id="manual", strategy="lag_aware", status="recommended", epoch=None,
        created_at=datetime(2025, 1, 1), created_by="t", max_lag_before=0, max_lag_after=0, imbalance_before=1.0,
        imbalance_after=1.0, spread_before=0, spread_after=0, moves=0, lower_bound=0, gap=0.0, reason="r",
        apply_mode="static assignments", metrics={
            "before": {"member_lag": {"worker-0": 32_000, "worker-1": 2_000},
                       "member_partitions": {"worker-0": 2, "worker-1": 1}},
            "after": {"member_lag": {"worker-0": 30_000, "worker-1": 4_000}},
        },
    )  # fmt: skip
    assert baseline_owners(plan, now, published) == {
        ("m", 0): "worker-0",
        ("m", 1): "worker-0",
        ("m", 2): "worker-1",
    }
    assert baseline_owners(plan, now, None) == {("m", p): None for p in range(3)}  # never published: unowned
    # a published plan is given the plan it replaced as ``published`` (services/plan_report.py): same rule
    assert baseline_owners(dataclasses.replace(plan, status="published"), now, published) == {
        ("m", 0): "worker-0", ("m", 1): "worker-0", ("m", 2): "worker-1",
    }  # fmt: skip
    c0 = MemberNow(
        member_id="C0", label="C0", group_instance_id=None, client_id="c", host="h", lag=0, partitions=1
    )
    live = NowView(members=[c0], partitions=[partition(0, "C0")])
    assert baseline_owners(plan, live, published) == {("m", 0): "C0"}  # a dynamic group: the snapshot

    assignments = [PlanAssignmentRecord(member, "m", p, lag, None, None)
                   for member, p, lag in (("worker-0", 0, 30_000), ("worker-1", 1, 2_000), ("worker-1", 2, 2_000))]  # fmt: skip
    assert [(m.label, m.lag_before, m.partitions_before, m.lag_after, m.partitions_after)
            for m in member_comparison(plan, now.members, assignments)] == [
        ("worker-0", 32_000, 2, 30_000, 1),
        ("worker-1", 2_000, 1, 4_000, 2),
    ]  # fmt: skip


def test_plans_filter_and_page(api: _Caller) -> None:
    everything = api.get("/api/plans", params={"page_size": 500}).json()
    assert everything["total"] == len(everything["items"]) > 0
    recommended = api.get("/api/plans", params={"status": "recommended"}).json()
    assert recommended["items"] and all(p["status"] == "recommended" for p in recommended["items"])
    kip = api.get("/api/plans", params={"group": "kip-example"}).json()
    # one plan: the second run held kip-example back (cool-down) and stored only its outcome
    assert {p["group_id"] for p in kip["items"]} == {"kip-example"} and kip["total"] == 1
    page2 = api.get("/api/plans", params={"page": 2, "page_size": 1}).json()
    assert page2["items"][0]["id"] == everything["items"][1]["id"]
    strategy = kip["items"][0]["strategy"]
    assert all(
        p["strategy"] == strategy
        for p in api.get("/api/plans", params={"strategy": strategy}).json()["items"]
    )


def test_openapi_documents_every_endpoint(api: _Caller) -> None:
    r = api.get("/openapi.json", user=None)
    assert r.status_code == 200
    paths = r.json()["paths"]
    assert set(paths) == {
        "/api/groups",
        "/api/groups/{group_id}",
        "/api/plans",
        "/api/plans/{plan_id}",
        "/api/plans/{plan_id}/approve",
        "/api/plans/{plan_id}/reject",
    }
    approve = paths["/api/plans/{plan_id}/approve"]["post"]
    assert {"401", "403", "404", "409", "503"} <= set(approve["responses"])
    assert "GroupList" in r.json()["components"]["schemas"]


# ------------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/api/plans", {"status": "bogus"}, "status"),
        ("/api/plans", {"page": 0}, "page"),
        ("/api/plans", {"strategy": "fastest"}, "strategy"),
        ("/api/groups", {"sort": "colour"}, "sort"),
        ("/api/groups", {"flagged": "maybe"}, "flagged"),
        ("/api/groups/kip-example", {"history": 0}, "history"),
    ],
)
def test_bad_filter_is_422_naming_the_field(api: _Caller, path: str, params: dict, field: str) -> None:
    r = api.get(path, params=params)
    assert r.status_code == 422
    assert f"'{field}'" in r.json()["detail"]


def test_unknown_group_and_plan_are_404_with_a_message(api: _Caller) -> None:
    r = api.get("/api/groups/no-such-group")
    assert r.status_code == 404 and "no-such-group" in r.json()["detail"]
    r = api.get("/api/plans/999999")
    assert r.status_code == 404 and r.json()["detail"] == "plan 999999 does not exist"
    r = api.post("/api/plans/999999/approve")
    assert r.status_code == 404


# ------------------------------------------------------------------------------------------ auth


def test_no_token_is_401_everywhere(api: _Caller) -> None:
    for path in ("/api/groups", "/api/groups/kip-example", "/api/plans", "/api/plans/1"):
        r = api.get(path, user=None)
        assert r.status_code == 401, path
        assert "kip-example" not in r.text
    assert api.post("/api/plans/1/approve", user=None).status_code == 401
    assert api.post("/api/plans/1/reject", user=None).status_code == 401
    bad = api.client.get(PREFIX + "/api/groups", headers={"Authorization": "Bearer not-a-jwt"})
    assert bad.status_code in (401, 403)


def test_pages_redirect_anonymous_users_to_airflow_login(api: _Caller) -> None:
    r = api.get("/", user=None)
    assert r.status_code == 303
    assert r.headers["location"].startswith("/auth/login?next=")
    assert api.get("/groups/kip-example", user=None).status_code == 303


def test_viewer_reads_but_cannot_approve(writable_api: _Caller) -> None:
    plan_id = _kip_plan_id(writable_api)
    assert writable_api.get("/api/groups", user="viewer").status_code == 200
    for action in ("approve", "reject"):
        r = writable_api.post(f"/api/plans/{plan_id}/{action}", user="viewer")
        assert r.status_code == 403, r.text
        assert "trigger" in r.json()["detail"]
    assert writable_api.get(f"/api/plans/{plan_id}").json()["plan"]["status"] == "recommended"


# -------------------------------------------------------------------------------- approve/reject


def test_approve_then_409_and_transition_recorded(writable_api: _Caller) -> None:
    from rebalance_advisor.services import static_members

    plan_id = _kip_plan_id(writable_api)
    # kip-example's consumers subscribe(): its plan is advice only until the group is manual-assign
    refused = writable_api.post(f"/api/plans/{plan_id}/approve", user="operator")
    assert refused.status_code == 409, refused.text
    assert "dynamic (subscribe()) group" in refused.json()["detail"]
    assert "advice only" in refused.json()["detail"] and "manual-assign" in refused.json()["detail"]
    assert writable_api.get(f"/api/plans/{plan_id}").json()["plan"]["status"] == "recommended"
    static_members.add("kip-example", "C0", ["t0"], writable_api.url)
    static_members.add("kip-example", "C1", ["t0"], writable_api.url)
    r = writable_api.post(f"/api/plans/{plan_id}/approve", user="operator", json={"note": "looks right"})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "approved"
    detail = writable_api.get(f"/api/plans/{plan_id}").json()
    last = detail["transitions"][-1]
    assert (last["from_status"], last["to_status"], last["actor"], last["note"]) == (
        "recommended",
        "approved",
        "operator",
        "looks right",
    )
    again = writable_api.post(f"/api/plans/{plan_id}/reject")
    assert again.status_code == 409
    assert "'approved'" in again.json()["detail"] and "recommended" in again.json()["detail"]


def test_reject_then_approve_conflict(writable_api: _Caller) -> None:
    plans = writable_api.get("/api/plans", params={"group": "kip-example"}).json()["items"]
    recommended = next(p for p in plans if p["status"] == "recommended")
    reason = "C1 is being drained <for> maintenance"
    r = writable_api.post(f"/api/plans/{recommended['id']}/reject", json={"note": reason})
    assert r.status_code == 200 and r.json()["status"] == "rejected"
    r = writable_api.post(f"/api/plans/{recommended['id']}/approve")
    assert r.status_code == 409 and "'rejected' is final" in r.json()["detail"]
    listed = {g["group_id"]: g for g in writable_api.get("/api/groups").json()["groups"]}
    assert listed["kip-example"]["latest_plan_status"] == "rejected"
    # the reason is stored with the transition and shown (escaped) on the group's page
    assert writable_api.get(f"/api/plans/{recommended['id']}").json()["transitions"][-1]["note"] == reason
    page = writable_api.get("/groups/kip-example").text
    assert '<q id="rejection-reason">C1 is being drained &lt;for&gt; maintenance</q>' in page
    assert "held_by_rejection" in page


# ------------------------------------------------------------------------------------- pages


def test_pages_render_groups_chart_and_buttons(api: _Caller) -> None:
    page = api.get("/")
    assert page.status_code == 200 and "kip-example" in page.text
    assert 'class="num imbalance hot"' in page.text  # kip-example is past the threshold
    group = api.get("/groups/kip-example")
    assert group.status_code == 200
    html = group.text
    for member, series, lag in (("C0", "now", 160000), ("C1", "now", 50000), ("C0", "plan", 100000),
                                ("C1", "plan", 110000)):  # fmt: skip
        assert f'data-member="{member}" data-series="{series}" data-lag="{lag}"' in html
    # kip-example's consumers subscribe(): its plan is advice only, said up front, with no Approve (a 409)
    assert 'id="advice-only"' in html and 'id="approve"' not in html and 'id="reject"' in html
    assert "<dialog" in html and "imbalance-line" in html
    assert "cdn" not in html.lower() and "<script src" not in html
    viewer = api.get("/groups/kip-example", user="viewer").text
    assert 'id="advice-only"' in viewer and 'id="approve"' not in viewer and 'id="reject"' not in viewer


# ----------------------------------------------------------------------------------- faults


def test_unreachable_database_is_503_and_the_page_says_so(auth: dict[str, str]) -> None:
    dead = "postgresql+psycopg://nobody@127.0.0.1:1/nowhere?connect_timeout=2"
    with _client(dead) as client:
        caller = _Caller(client, auth)
        r = caller.get("/api/groups")
        assert r.status_code == 503 and "unreachable" in r.json()["detail"]
        page = caller.get("/")
        assert page.status_code == 503
        assert (
            "The plan database is unreachable" in page.text or "the plan database is unreachable" in page.text
        )
        assert caller.post("/api/plans/1/approve").status_code == 503


def test_plugin_is_discovered_by_airflow(auth: dict[str, str]) -> None:
    """Airflow's own plugin manager loads the repo's plugin: the app under its prefix, the nav entry."""
    from airflow import plugins_manager, settings

    cached = (
        plugins_manager._get_plugins,
        plugins_manager.get_fastapi_plugins,
        plugins_manager._get_ui_plugins,
    )
    previous = settings.PLUGINS_FOLDER
    settings.PLUGINS_FOLDER = str(Path(__file__).resolve().parents[2] / "plugins")
    for fn in cached:
        fn.cache_clear()
    try:
        plugins, errors = plugins_manager._get_plugins()
        apps, _ = plugins_manager.get_fastapi_plugins()
        external_views, _ = plugins_manager._get_ui_plugins()
    finally:
        settings.PLUGINS_FOLDER = previous
        for fn in cached:
            fn.cache_clear()
    assert not errors, errors
    ours = [a for a in apps if a["url_prefix"] == PREFIX]
    assert len(ours) == 1 and ours[0]["name"] == "Rebalance advisor"
    assert [v["href"] for v in external_views if v["url_route"] == "rebalance-advisor"] == [f"{PREFIX}/"]
