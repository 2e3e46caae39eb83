"""A link from the advisor's page into Airflow's own UI works inside Airflow's sandboxed iframe.

Airflow shows plugin pages in ``<iframe sandbox="allow-scripts allow-same-origin allow-forms
allow-downloads">``: no ``allow-top-navigation``, so a plain ``target="_top"`` link does nothing
there. Here a same-origin parent page embeds the group page exactly so (headless Chromium, the app
behind uvicorn, Airflow's real auth cookie) and listens as Airflow's router does (``popstate``):
clicking "open kafka_plan_approval in Airflow" must move the parent to the DAG's route, without
reloading it.
"""

from __future__ import annotations

import pytest

from tests._plans import record_plan
from tests.e2e.test_webui_api import _client, auth  # noqa: F401
from tests.e2e.test_webui_in_force import OTHER, manual_group  # noqa: F401
from tests.e2e.test_webui_pages import _served
from tests.support.browser import browser, needs_chromium  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.airflow]

#: Airflow's frame, as its UI renders external views (airflow/ui: the plugin iframe's sandbox)
PARENT = """<!doctype html><title>airflow</title>
<script>window.stayed = true; addEventListener("popstate", () => { document.title = location.pathname; });</script>
<iframe id="plugin" sandbox="allow-scripts allow-same-origin allow-forms allow-downloads"
        src="/rebalance-advisor/groups/manual" style="width:1200px;height:1400px"></iframe>"""


@needs_chromium
def test_the_approval_link_moves_airflows_own_window(manual_group, auth, browser) -> None:  # noqa: F811
    from fastapi.responses import HTMLResponse
    from rebalance_advisor.services import plan_lifecycle
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    url, _published = manual_group
    approved = record_plan(url, "manual", ["w0", "w1"], OTHER)
    plan_lifecycle.approve(approved, "tests", url)  # its page links to the approval DAG
    host = _client(url).app
    host.add_api_route("/", lambda: HTMLResponse(PARENT))
    with _served(host) as client:
        base = str(client.base_url).rstrip("/")
        browser.get(f"{base}/openapi.json")  # same origin first, then Airflow's cookie
        browser.add_cookie({"name": "_token", "value": auth["admin"], "path": "/"})
        browser.get(f"{base}/")
        wait = WebDriverWait(browser, 30)
        wait.until(ec.frame_to_be_available_and_switch_to_it((By.ID, "plugin")))
        link = wait.until(ec.element_to_be_clickable((By.ID, "trigger-link")))
        assert link.get_attribute("target") == "_top"
        link.click()
        browser.switch_to.default_content()
        wait.until(lambda b: b.execute_script("return location.pathname") == "/dags/kafka_plan_approval")
        assert browser.title == "/dags/kafka_plan_approval"  # the router's popstate fired
        assert browser.execute_script("return window.stayed") is True  # no reload: Airflow's SPA routes it
