"""The FastAPI app the Airflow plugin mounts: JSON API + pages over the plan database.

:func:`create_app` takes a zero-argument callable returning the database URL, called per request,
so the Airflow connection can change without restarting the API server and tests can point one app
at SQLite or PostgreSQL. Errors map to HTTP once, here: unknown group/plan 404, not-recommended 409,
bad query values 422 naming the field, unreachable database 503 (pages say so in words).
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response

from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.webui import api, pages
from rebalance_advisor.webui.auth import LoginRequired, login_url
from rebalance_advisor.webui.plan_decisions import Conflict
from rebalance_advisor.webui.queries import NotFound

DB_FAULTS = (sa.exc.OperationalError, sa.exc.InterfaceError, sa.exc.ProgrammingError)
UNREACHABLE = "the plan database is unreachable"


def default_db_url() -> str:
    """Connection ``rebalance_advisor_db``, else ``REBALANCE_ADVISOR_DB_URL``, else the SQLite default."""
    try:
        from rebalance_advisor.adapters.airflow_connections import database_url_from_connection
    except ImportError:  # the helper is not there yet: same order, environment part only
        from rebalance_advisor.settings import database_url

        return database_url()
    return database_url_from_connection()


def _is_api(request: Request) -> bool:
    root = request.scope.get("root_path", "")
    path = request.url.path
    return path.removeprefix(root).startswith("/api") or path.startswith("/api")


def _answer(request: Request, status: int, message: str, title: str) -> Response:
    if _is_api(request):
        return JSONResponse({"detail": message}, status_code=status)
    return pages.error_page(request, title, message, status)


def is_db_fault(error: BaseException) -> bool:
    """True for driver-level failures (connection refused, missing tables), however wrapped."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, DB_FAULTS):
            return True
        seen = seen.__cause__
    return False


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(NotFound)
    async def not_found(request: Request, error: NotFound) -> Response:
        return _answer(request, 404, str(error), "Not found")

    @app.exception_handler(Conflict)
    async def conflict(request: Request, error: Conflict) -> Response:
        return _answer(request, 409, str(error), "Conflict")

    @app.exception_handler(LoginRequired)
    async def login(request: Request, _error: LoginRequired) -> Response:
        return RedirectResponse(login_url(request), status_code=303)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> Response:
        problems = []
        for item in error.errors():
            loc = [str(p) for p in item.get("loc", ())]
            where = f"{loc[0]} parameter '{'.'.join(loc[1:])}'" if len(loc) > 1 else ".".join(loc)
            problems.append(f"{where}: {item.get('msg')}")
        return JSONResponse(
            {"detail": "; ".join(problems), "errors": jsonable(error.errors())}, status_code=422
        )

    @app.exception_handler(AdvisorError)
    async def advisor_error(request: Request, error: AdvisorError) -> Response:
        if is_db_fault(error):
            return _answer(request, 503, f"{UNREACHABLE}: {error}", "Database unavailable")
        return _answer(request, 500, str(error), "Error")

    for fault in DB_FAULTS:
        app.add_exception_handler(fault, _db_fault)


async def _db_fault(request: Request, error: Exception) -> Response:
    return _answer(
        request,
        503,
        f"{UNREACHABLE}: {type(error).__name__}: {error}".splitlines()[0],
        "Database unavailable",
    )


def jsonable(errors: list) -> list:
    from fastapi.encoders import jsonable_encoder

    return jsonable_encoder(errors, custom_encoder={Exception: str})


def create_app(db_url: Callable[[], str] = default_db_url) -> FastAPI:
    """The app; ``db_url`` is called per request (see the module docstring)."""
    app = FastAPI(
        title="Rebalance advisor",
        description="Consumer-group imbalance and assignment plans. Authenticate as for Airflow's "
        "`/api/v2`: `Authorization: Bearer <JWT from POST /auth/token>` (or the Airflow UI's cookie).",
        version="1",
        docs_url=None,  # Swagger UI loads from a CDN; the schema itself is at /openapi.json
        redoc_url=None,
    )
    app.state.db_url = db_url
    app.include_router(api.router)
    app.include_router(pages.router)
    install_error_handlers(app)
    return app
