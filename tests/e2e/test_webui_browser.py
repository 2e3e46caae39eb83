"""The UI in a real browser: ``airflow api-server`` with the repo's plugin, Debian's headless Chromium.

Flow a person would follow: open the advisor page, get sent to Airflow's login, sign in, see
``kip-example`` flagged with its imbalance, open it, read C0 and C1 before/after in the SVG chart,
approve the plan through the confirmation dialog, and see the status change. The database is a
private copy of the real planner output (tests/support/planned_demo). The server runs in its own
process group and is stopped by that group; the screenshot stays in the test's temp dir.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from rebalance_advisor.devtools.local_kafka import free_port

from tests.support.planned_demo import PlannedDb, copy_of, planned_demo_db  # noqa: F401

pytestmark = [
    pytest.mark.browser,
    pytest.mark.kafka,
    pytest.mark.spark,
    pytest.mark.airflow,
    pytest.mark.slow,
]

REPO = Path(__file__).resolve().parents[2]
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")


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


@pytest.fixture
def browser(tmp_path: Path) -> Iterator:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--no-first-run", "--window-size=1280,1600", f"--user-data-dir={tmp_path / 'chrome'}"):  # fmt: skip
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER), reason="chromium/chromedriver missing: make test installs them"
)
@pytest.mark.parametrize("planned_demo_db", ["sqlite"], indirect=True)
def test_login_see_imbalance_and_approve_in_chromium(api_server, browser, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    base, _db_url = api_server
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
    assert "recommended" in browser.find_element(By.ID, "plan-status").text
    moves = browser.find_element(By.ID, "moves").text
    assert "C0" in moves and "C1" in moves

    browser.find_element(By.ID, "approve").click()
    dialog = wait.until(ec.visibility_of_element_located((By.ID, "confirm")))
    assert "Approve plan" in dialog.text and "kip-example" in dialog.text
    browser.save_screenshot(str(tmp_path / "confirm-dialog.png"))
    browser.find_element(By.ID, "confirm-yes").click()
    wait.until(ec.text_to_be_present_in_element((By.ID, "plan-status"), "approved"))
    assert not browser.find_elements(By.ID, "approve")
    shot = tmp_path / "kip-example-approved.png"
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000
    print(f"screenshots: {shot} and {tmp_path / 'confirm-dialog.png'}")

    # the nav entry: Airflow's own plugin API lists the external view for the signed-in user
    token = browser.get_cookie("_token")["value"]
    req = urllib.request.Request(f"{base}/api/v2/plugins", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        plugins = json.load(resp)["plugins"]
    ours = next(p for p in plugins if p["name"] == "rebalance_advisor")
    assert ours["external_views"][0]["href"] == "/rebalance-advisor/"
    assert ours["fastapi_apps"][0]["url_prefix"] == "/rebalance-advisor"
