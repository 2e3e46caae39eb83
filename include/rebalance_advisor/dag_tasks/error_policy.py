"""The one error policy of every DAG task: user errors fail at once, infrastructure errors retry.

- An :class:`~rebalance_advisor.errors.AdvisorError` that is not
  :class:`~rebalance_advisor.errors.InfrastructureUnavailable` cannot heal by retrying (bad params,
  an unknown snapshot or plan, a refused transition, a missing or incomplete Airflow connection):
  the task fails on its first try (``AirflowFailException``) and frees its run slot.
- ``InfrastructureUnavailable`` (database, Kafka, Spark) and any unexpected exception keep the
  DAG's retries.

Every task body in ``dag_tasks`` is wrapped with :func:`under_error_policy`, so no DAG file and no
task handles errors by itself (docs/architecture.md, "Errors").
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, ParamSpec, TypeVar

from rebalance_advisor.errors import AdvisorError, InfrastructureUnavailable

P = ParamSpec("P")
R = TypeVar("R")


def is_permanent(error: BaseException) -> bool:
    """True for a user error that a retry cannot fix."""
    return isinstance(error, AdvisorError) and not isinstance(error, InfrastructureUnavailable)


@contextmanager
def fail_fast_on_user_errors() -> Iterator[None]:
    """Re-raise user errors as ``AirflowFailException`` (no retries); others unchanged (retried)."""
    try:
        yield
    except Exception as error:
        if not is_permanent(error):
            raise
        from airflow.sdk.exceptions import AirflowFailException

        raise AirflowFailException(str(error)) from error


def retry_args(retries: int, delay_s: float, backoff: bool = True, **task_defaults: Any) -> dict[str, Any]:
    """A DAG's ``default_args``: how often and how soon the errors that may heal are retried (user
    errors never are, see :func:`fail_fast_on_user_errors`), plus other task defaults."""
    args = {"retries": retries, "retry_delay": timedelta(seconds=delay_s), **task_defaults}
    if backoff:
        args["retry_exponential_backoff"] = True
    return args


def under_error_policy(body: Callable[P, R]) -> Callable[P, R]:
    """Decorate a task body with :func:`fail_fast_on_user_errors`."""

    @functools.wraps(body)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        with fail_fast_on_user_errors():
            return body(*args, **kwargs)

    return run
