"""Who may see and change plans: the Airflow API server's own auth, not a second login.

The app runs inside ``airflow api-server`` as a plugin, so Airflow's FastAPI security dependencies
apply as they do to ``/api/v2``: :func:`airflow.api_fastapi.core_api.security.get_user` reads the
JWT from ``Authorization: Bearer`` (API clients) or from the ``_token`` cookie the Airflow UI sets
(browsers), and the configured auth manager (SimpleAuthManager, FAB, Keycloak, ...) decides.

- Reading plan data needs read access to DAG runs (every Airflow role that can see DAGs has it).
- Approving or rejecting a plan needs the right to trigger a run of the approval DAG
  (``POST`` on its DAG runs), the same check Airflow makes for the trigger button: the DAG that
  applies decisions and publishes, ``kafka_plan_approval``. The UI's approve only records the
  decision; publishing is that DAG's (or ``rebalance-advisor plan-status publish ID``).
Anonymous API calls get 401; pages redirect to the auth manager's login page instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Annotated

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.base_user import BaseUser
from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
from airflow.api_fastapi.core_api.security import GetUserDep, bearer_scheme, get_user, requires_access_dag
from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials

from rebalance_advisor.domain.parameters import APPROVAL_DAG_ID

#: DAG whose trigger right approve/reject requires: the one that applies decisions and publishes plans.
DEFAULT_APPROVAL_DAG_ID = APPROVAL_DAG_ID


def approval_dag_id() -> str:
    """The DAG id checked for approve/reject (``REBALANCE_ADVISOR_APPROVAL_DAG_ID`` overrides)."""
    return os.environ.get("REBALANCE_ADVISOR_APPROVAL_DAG_ID") or DEFAULT_APPROVAL_DAG_ID


#: dependency: authenticated user allowed to read DAG runs (401 anonymous, 403 no read right).
require_read: Callable = requires_access_dag("GET", DagAccessEntity.RUN)


def require_trigger(request: Request, user: GetUserDep) -> BaseUser:
    """Dependency: the user may trigger the approval DAG, else 403 (401 when anonymous)."""
    if not can_trigger(user):
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            f"approving or rejecting a plan needs the right to trigger DAG {approval_dag_id()!r}",
        )
    return user


def can_read(user: BaseUser) -> bool:
    return get_auth_manager().is_authorized_dag(method="GET", access_entity=DagAccessEntity.RUN, user=user)


def can_trigger(user: BaseUser) -> bool:
    """Same question Airflow asks before a manual DAG run: POST on the approval DAG's runs."""
    return get_auth_manager().is_authorized_dag(
        method="POST",
        access_entity=DagAccessEntity.RUN,
        details=DagDetails(id=approval_dag_id()),
        user=user,
    )


class LoginRequired(Exception):
    """Raised by page dependencies; the app answers with a redirect to the auth manager's login."""


async def page_user(
    request: Request, bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)]
) -> BaseUser:
    """Dependency for HTML pages: the cookie's (or bearer's) user, else a redirect to log in."""
    try:
        user = await get_user(request, None, bearer)
    except HTTPException as error:
        if error.status_code in (status.HTTP_401_UNAUTHORIZED, status.HTTP_403_FORBIDDEN):
            raise LoginRequired from error
        raise
    if not can_read(user):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "this user may not read DAG runs")
    return user


def login_url(request: Request) -> str:
    """The auth manager's login page, coming back here afterwards."""
    return get_auth_manager().get_url_login(next_url=str(request.url))


PageUser = Annotated[BaseUser, Depends(page_user)]
TriggerUser = Annotated[BaseUser, Depends(require_trigger)]
