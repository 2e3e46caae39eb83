"""The advisor's Airflow UI: a FastAPI app (JSON API + SVG pages) mounted by ``plugins/``."""

from rebalance_advisor.webui.app import create_app

__all__ = ["create_app"]
