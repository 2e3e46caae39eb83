"""The package's error types: what the CLI, the web API and the DAGs' error policy tell apart.

- :class:`AdvisorError`: a problem the user can fix (bad parameter, unknown snapshot or plan, a
  missing connection). The CLI prints one line and exits non-zero; the API answers 4xx; a DAG task
  fails at once, without retries (``dag_tasks/error_policy.py``).
- :class:`InfrastructureUnavailable`: a part we depend on is down or failed mid-way (database,
  Kafka, Spark). Retrying can help, so DAG tasks keep their retries.
"""


class AdvisorError(Exception):
    """A problem the user can fix: the message says what is wrong and what to do."""


class InfrastructureUnavailable(AdvisorError):
    """The database, Kafka or Spark is unreachable or failed mid-way: a retry may succeed."""
