"""Every page rendered with hostile ids, reasons and notes comes out escaped.

Kafka allows almost any group id, and ids, topic names, reasons and notes all reach the pages.
The data goes the real way: a hand-made snapshot with hostile names stored by the store, planned
twice by the real Spark planner (the second run inside the cool-down, so a standing recommended
plan is shown too), reasons set to markup, a decision with a hostile note through the real API;
pages come from the app with Airflow's real auth. Each page is then read with an HTML parser,
as a browser would read it: no injected element or event handler, and every hostile string
still shown, intact, as text.
"""

from __future__ import annotations

import contextlib
import importlib.util
import re
import socket
import threading
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.e2e.test_webui_api import _Caller, _client, auth  # noqa: F401

pytestmark = [pytest.mark.spark, pytest.mark.airflow, pytest.mark.slow]

#: slashes (also doubled, leading and trailing), a dot segment, an encoded slash, query and fragment marks
GROUP = '/<svg onload=alert("g")>&\'grp/../a//b%2Fc?d=1#e/'  # a real group id: Kafka allows all of it
STATIC = "<img src=x onerror=alert('m')>"  # a static member's group.instance.id
DYNAMIC = '"><script>alert(1)</script>'  # a dynamic member's id
TOPIC = 't"<iframe src=javascript:alert(3)>&'
REASON = '</p><script>alert("reason")</script>&\'"'
NOTE = "<iframe onload=alert(4)>"
HOSTILE = (GROUP, STATIC, DYNAMIC, TOPIC, REASON, NOTE)


class _Page(HTMLParser):
    """Tags, attributes, script bodies and visible text, as the browser's parser sees them."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str]] = []
        self.scripts: list[str] = []
        self.text: list[str] = []
        self._in_script = False
        self.feed(html)

    def handle_starttag(self, tag, attrs) -> None:
        self.tags.append(tag)
        self.attrs.extend((k, v or "") for k, v in attrs)
        self._in_script = tag == "script"

    def handle_endtag(self, tag) -> None:
        self._in_script = False

    def handle_data(self, data) -> None:
        (self.scripts if self._in_script else self.text).append(data)

    def shows(self, value: str) -> bool:
        return value in "".join(self.text) or any(v == value for _, v in self.attrs)


def _assert_inert(html: str, shown: tuple[str, ...]) -> _Page:
    page = _Page(html)
    assert not {"img", "iframe"} & set(page.tags), "an injected element was parsed"
    handlers = [k for k, _ in page.attrs if k.startswith("on")]
    assert not handlers, f"event handler attributes: {handlers}"
    assert not any("alert(" in s for s in page.scripts), "injected script"
    for value in shown:
        assert page.shows(value), f"{value!r} is not shown intact"
    return page


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory: pytest.TempPathFactory, airflow_home: Path) -> str:
    import sqlalchemy as sa
    from rebalance_advisor.adapters.spark_planner import run_planner
    from rebalance_advisor.domain.decisions import Thresholds
    from rebalance_advisor.store import db
    from rebalance_advisor.store.plan_models import GroupOutcome, Plan
    from rebalance_advisor.store.snapshots import write_snapshot

    from tests._planner import live_spark, make_snapshot

    url = f"sqlite:///{tmp_path_factory.mktemp('hostile') / 'advisor.db'}"
    db.upgrade(url)
    group = {
        "topics": {TOPIC: [(100_000, 0), (60_000, 0), (50_000, 0)]},
        "members": [("m-0", STATIC, [(TOPIC, 0), (TOPIC, 1)], None), (DYNAMIC, None, [(TOPIC, 2)], None)],
    }
    for _ in range(2):  # the second run keeps the first plan (cool-down): a standing recommendation
        sid = write_snapshot(make_snapshot({GROUP: group}), url)
        run = run_planner(live_spark(), url, sid, Thresholds(cooldown_minutes=30), created_by="hostile-test")
        assert GROUP in run.flagged
    with db.connect(url) as conn:
        conn.execute(sa.update(GroupOutcome).values(reason=REASON))
        conn.execute(sa.update(Plan).values(reason=REASON))
    return url


@contextlib.contextmanager
def _served(app):
    """``app`` behind a real HTTP server (uvicorn, which Airflow's api-server runs) and an HTTP
    client. Not the test client: it percent-decodes the path twice, so an id holding "%2F" would
    arrive as "/" and the route would never see the id a browser sends."""
    import httpx
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{sock.getsockname()[1]}", timeout=60) as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


def test_every_page_escapes_hostile_ids_reasons_and_notes(hostile_db: str, auth) -> None:  # noqa: F811
    from rebalance_advisor.services import static_members

    with _served(_client(hostile_db).app) as client:
        api = _Caller(client, auth)
        groups = api.get("/")
        assert groups.status_code == 200
        _assert_inert(groups.text, (GROUP, REASON))  # the reason is the outcome cell's tooltip

        path = f"/groups/{quote(GROUP, safe='')}"
        assert f'href="/rebalance-advisor{path}"' in groups.text
        page = api.get(path)
        assert page.status_code == 200, page.text
        seen = _assert_inert(page.text, HOSTILE[:-1])
        assert "standing-plan" in {v for k, v in seen.attrs if k == "id"}
        labels = {v for k, v in seen.attrs if k == "data-member"}
        assert {STATIC, DYNAMIC} <= labels

        # a dynamic (subscribe()) group: advice only up front, no Approve button (it would get a 409)
        ids = {v for k, v in seen.attrs if k == "id"}
        assert "advice-only" in ids and "approve" not in ids and "reject" in ids
        detail = api.get(f"/api{path}")  # the JSON twin: same route shape, same id back
        assert detail.status_code == 200, detail.text
        assert (detail.json()["group_id"], detail.json()["manual_assign"]) == (GROUP, False)
        assert detail.json()["apply_mode"] == "advice only"
        assert "Applied by: <b>advice only</b>" in page.text

        plan_id = api.get("/api/groups").json()["groups"][0]["latest_plan_id"]
        static_members.add(GROUP, STATIC, ["t0"], hostile_db)  # now manual-assign: Approve is offered
        registered = _assert_inert(api.get(path).text, HOSTILE[:-1])
        ids = {v for k, v in registered.attrs if k == "id"}
        assert "approve" in ids and "advice-only" not in ids
        assert api.get(f"/api{path}").json()["manual_assign"] is True
        assert api.get(f"/api{path}").json()["apply_mode"] == "static assignments"
        r = api.post(f"/api/plans/{plan_id}/approve", json={"note": NOTE})
        assert r.status_code == 200, r.text
        approved = api.get(path)
        seen = _assert_inert(approved.text, HOSTILE)
        assert 'id="trigger-link" href="/dags/kafka_plan_approval" target="_top"' in approved.text
        assert NOTE in "".join(seen.text)  # the decision's note, in the plan's history

        for near in (GROUP + "x", GROUP.rstrip("/"), "/" + GROUP):  # the route keeps every slash
            missing = api.get(f"/groups/{quote(near, safe='')}")
            assert missing.status_code == 404, near
            _assert_inert(missing.text, (repr(near),))  # the message quotes the id with repr()


def test_trigger_link_is_a_route_of_the_installed_airflow_ui() -> None:
    """The link after approving opens the approval DAG's page, whose Trigger button opens the
    trigger form (Airflow 3.3's UI has no route of its own for the form): check that route."""
    spec = importlib.util.find_spec("airflow")
    assert spec is not None and spec.submodule_search_locations
    dist = Path(next(iter(spec.submodule_search_locations))) / "ui" / "dist" / "assets"
    bundle = "".join(p.read_text(errors="ignore") for p in dist.glob("index-*.js"))
    assert re.search(r"path:`dags/:dagId`", bundle), "Airflow's UI has no dags/:dagId route"
    assert "trigger-dag-button" in bundle  # the Trigger button on that page
