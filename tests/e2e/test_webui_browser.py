"""The UI in a real browser: ``airflow api-server`` with the repo's plugin, Debian's headless Chromium.

Flow a person would follow: open the advisor page, get sent to Airflow's login, sign in, see
``kip-example`` flagged with its imbalance, open it, read C0 and C1 before/after in the SVG chart,
approve the plan through the confirmation dialog, and see the status change and the link to the
approval DAG. Then the group with real, long consumer ids (``zipf-multi``, six dynamic members):
its labels are shortened, carry the full id on hover, and no two chart labels overlap (boxes from
``getBBox()``). The database is a private copy of the real planner output
(tests/support/planned_demo). The server runs in its own process group and is stopped by that
group; screenshots stay in the test's temp dir (the path is printed).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from rebalance_advisor.devtools.local_kafka import free_port

from tests.support.browser import (  # noqa: F401
    browser,
    chart_geometry,
    chart_text_boxes,
    needs_chromium,
    overlapping,
    replaced,
)
from tests.support.planned_demo import PlannedDb, copy_of, planned_demo_db  # noqa: F401

pytestmark = [
    pytest.mark.browser,
    pytest.mark.kafka,
    pytest.mark.spark,
    pytest.mark.airflow,
    pytest.mark.slow,
]

REPO = Path(__file__).resolve().parents[2]


def _wait_http(url: str, timeout: float, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"api-server exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"api-server did not answer in {timeout:.0f} s:\n{log.read_text()[-4000:]}")


@pytest.fixture
def api_server(
    request: pytest.FixtureRequest,
    airflow_home: Path,
    planned_demo_db: PlannedDb,  # noqa: F811
    tmp_path: Path,
):
    """``airflow api-server`` (1 worker) on a free port with the plugin, over a private DB copy."""
    db_url = copy_of(request, planned_demo_db, tmp_path)
    port = free_port()
    passwords = tmp_path / "passwords.json"
    passwords.write_text(json.dumps({"admin": "admin-pass", "viewer": "viewer-pass"}))
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,viewer:viewer",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "AIRFLOW__API_AUTH__JWT_SECRET": "browser-test-secret-" + "x" * 48,
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "REBALANCE_ADVISOR_DB_URL": db_url,
    }
    log = tmp_path / "api-server.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                str(REPO / ".venv/bin/airflow"),
                "api-server",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "-w",
                "1",
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped as a whole below
        )
    try:
        _wait_http(f"http://127.0.0.1:{port}/api/v2/version", 90, proc, log)
        yield f"http://127.0.0.1:{port}", db_url
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        except ProcessLookupError:
            pass


@needs_chromium
@pytest.mark.parametrize("planned_demo_db", ["sqlite"], indirect=True)
def test_login_see_imbalance_and_approve_in_chromium(api_server, browser, tmp_path: Path) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    base, db_url = api_server
    wait = WebDriverWait(browser, 30)

    browser.get(f"{base}/rebalance-advisor/")
    wait.until(ec.presence_of_element_located((By.NAME, "username")))  # Airflow's own login page
    assert "/auth/login" in browser.current_url
    browser.find_element(By.NAME, "username").send_keys("admin")
    browser.find_element(By.NAME, "password").send_keys("admin-pass")
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()

    row = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, 'tr[data-group="kip-example"]')))
    assert "flagged" in row.get_attribute("class")
    imbalance = row.find_element(By.CSS_SELECTOR, "td.imbalance")
    assert imbalance.text == "1.52" and "hot" in imbalance.get_attribute("class")
    # the second run was held by the cool-down while the first run's plan stands: the page says so
    outcome = row.find_element(By.CSS_SELECTOR, "td.outcome").text
    assert outcome.startswith("held_by_cooldown") and "still awaits a decision" in outcome
    _timestamps_have_zone_and_whole_seconds(browser)
    _screenshot(browser, tmp_path / "groups.png")

    row.find_element(By.LINK_TEXT, "kip-example").click()
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "svg.member-lag")))
    assert browser.find_element(By.ID, "imbalance").text == "1.52"
    bars = {
        (b.get_attribute("data-member"), b.get_attribute("data-series")): int(b.get_attribute("data-lag"))
        for b in browser.find_elements(By.CSS_SELECTOR, "svg.member-lag rect.bar")
    }
    assert bars == {
        ("C0", "now"): 160_000,
        ("C1", "now"): 50_000,
        ("C0", "plan"): 100_000,
        ("C1", "plan"): 110_000,
    }
    labels = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "svg.member-lag text.member-label")]
    assert labels == ["C0", "C1"]
    assert "standing recommendation" in browser.find_element(By.ID, "standing-plan").text.lower()
    assert browser.find_element(By.ID, "current-threshold").text == "current threshold 1.25"
    assert "with imbalance threshold 1.25" in browser.find_element(By.ID, "plan-threshold").text
    _no_label_overlaps(browser)
    assert "recommended" in browser.find_element(By.ID, "plan-status").text
    moves = browser.find_element(By.ID, "moves").text
    assert "C0" in moves and "C1" in moves

    # kip-example's consumers subscribe(): the plan is advice only, said before any click, no Approve
    assert browser.find_element(By.ID, "advice-only").text.startswith("Advice only.")
    assert not browser.find_elements(By.ID, "approve")
    plan_id = browser.find_element(By.ID, "reject").get_attribute("data-plan")
    _screenshot(browser, tmp_path / "kip-example-advice-only.png")

    from rebalance_advisor.services import static_members

    for member in ("C0", "C1"):  # registered as manual-assign, the plan can be approved
        static_members.add("kip-example", member, ["t0"], db_url)
    browser.refresh()
    assert not browser.find_elements(By.ID, "advice-only")
    assert wait.until(ec.element_to_be_clickable((By.ID, "approve"))).get_attribute("data-plan") == plan_id
    browser.find_element(By.ID, "approve").click()
    dialog = wait.until(ec.visibility_of_element_located((By.ID, "confirm")))
    assert "Approve plan" in dialog.text and "kip-example" in dialog.text
    browser.save_screenshot(str(tmp_path / "confirm-dialog.png"))
    before = browser.find_element(By.ID, "plan-status")
    browser.find_element(By.ID, "confirm-yes").click()
    # the page reloads once the decision is stored (decide.js): read the new page's status, not the
    # old one while it is being replaced (Chrome then answers "Node ... does not belong to the document",
    # to the staleness check too: tests/support/browser.replaced)
    wait.until(replaced(before))
    wait.until(ec.text_to_be_present_in_element((By.ID, "plan-status"), "approved"))
    assert not browser.find_elements(By.ID, "approve")
    link = browser.find_element(By.ID, "trigger-link")  # to the approval DAG, whose Trigger opens the form
    assert link.get_attribute("href") == f"{base}/dags/kafka_plan_approval"
    assert link.get_attribute("target") == "_top"  # out of the iframe Airflow shows plugin pages in
    assert f"plan_id {plan_id}" in browser.find_element(By.ID, "publish-note").text
    _screenshot(browser, tmp_path / "kip-example-approved.png")

    # long, real consumer ids: shortened labels, the full id on hover, nothing overlapping
    browser.get(f"{base}/rebalance-advisor/groups/zipf-multi")
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "svg.member-lag")))
    _screenshot(browser, tmp_path / "zipf-multi.png")
    boxes = chart_text_boxes(browser)
    members = [b for b in boxes if b.css == "member-label"]
    assert len(members) == 6
    for label in members:
        full = label.tooltip
        assert full and len(full) > 36, full  # client id + "-" + UUID: a real generated member id
        head, ellipsis, tail = label.text.partition("…")
        assert ellipsis and full.startswith(head) and full.endswith(tail) and len(tail) >= 6, label
    assert len({m.text for m in members}) == 6
    _no_label_overlaps(browser)
    print(
        f"screenshots in {tmp_path}: groups.png, kip-example-advice-only.png, confirm-dialog.png, "
        "kip-example-approved.png, zipf-multi.png"
    )

    # the nav entry: Airflow's own plugin API lists the external view for the signed-in user
    token = browser.get_cookie("_token")["value"]
    req = urllib.request.Request(f"{base}/api/v2/plugins", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        plugins = json.load(resp)["plugins"]
    ours = next(p for p in plugins if p["name"] == "rebalance_advisor")
    assert ours["external_views"][0]["href"] == "/rebalance-advisor/"
    assert ours["fastapi_apps"][0]["url_prefix"] == "/rebalance-advisor"


def _screenshot(driver, path: Path) -> None:
    """The whole page: the window is grown to the document's height first."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(max(height + 200, 800), 6000))
    driver.save_screenshot(str(path))
    assert path.stat().st_size > 10_000


def _no_label_overlaps(driver) -> None:
    boxes = chart_text_boxes(driver)
    assert boxes, "no chart text found"
    assert overlapping(boxes) == []
    for chart in chart_geometry(driver):
        mine = [b for b in boxes if b.chart == chart["chart"]]
        assert all(b.x >= -0.5 and b.x + b.w <= chart["width"] + 0.5 for b in mine), chart
        if chart["bars_x"] is not None:  # member labels end left of the bars
            assert all(b.x + b.w <= chart["bars_x"] for b in mine if b.css == "member-label"), chart


def _timestamps_have_zone_and_whole_seconds(driver) -> None:
    import re

    from selenium.webdriver.common.by import By

    stamps = [t.text for t in driver.find_elements(By.CSS_SELECTOR, "time.ts")]
    assert stamps
    for stamp in stamps:  # the browser's zone here (Airflow's default): UTC or its name, never microseconds
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+", stamp), stamp
