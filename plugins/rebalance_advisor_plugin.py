"""Airflow 3 plugin: mounts the advisor's FastAPI app at /rebalance-advisor and adds a nav entry.

Thin on purpose: the app lives in the package (``rebalance_advisor.webui``) so it is tested
without a plugin manager. No Flask/AppBuilder (that needs the FAB provider).
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin
from rebalance_advisor.dag_tasks import form_validation
from rebalance_advisor.webui import create_app

URL_PREFIX = "/rebalance-advisor"
#: the API server validates the trigger forms: their refusals in plain words (form_validation)
form_validation.register()


class RebalanceAdvisorPlugin(AirflowPlugin):
    name = "rebalance_advisor"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Rebalance advisor"}]
    external_views = [
        {
            "name": "Rebalance advisor",
            "href": f"{URL_PREFIX}/",
            "destination": "nav",
            "category": "browse",
            "url_route": "rebalance-advisor",
        }
    ]
