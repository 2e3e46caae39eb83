"""The advisor's Airflow UI: a FastAPI app (JSON API + SVG pages) mounted by ``plugins/``.

``create_app`` is imported on first use: the app pulls in Airflow's auth, while the rendering
modules (``svg``, ``rendering``) must import without configuring Airflow.
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from rebalance_advisor.webui.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
