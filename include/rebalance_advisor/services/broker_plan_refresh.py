"""Keep the broker plan records of published plans fresh while the advisor runs.

The ``advised`` assignor ignores a plan record older than its bound (``plan.max.age.ms``, 1 h by
default), so a group whose advisor stopped goes back to ``uniform``. The advisor DAG therefore
writes each published broker-applied plan's record again once it is
:data:`~rebalance_advisor.domain.broker_plan_record.REFRESH_AFTER_S` old (same plan, same epoch:
no re-assignment). docs/operations/broker-applied-plans.md, "A plan stays fresh while the advisor runs".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rebalance_advisor.domain.apply_mode import BROKER
from rebalance_advisor.domain.broker_plan_record import BROKER_PLAN_TOPIC, REFRESH_AFTER_S
from rebalance_advisor.store import db
from rebalance_advisor.store.plan_queries import published_plans_applied_by


def refresh_published_broker_plans(
    url: str | None = None,
    *,
    kafka_conn_id: str | None = None,
    kafka_config: Mapping[str, Any] | None = None,
    after_s: float = REFRESH_AFTER_S,
    topic: str = BROKER_PLAN_TOPIC,
    timeout: float = 30.0,
) -> list[str]:
    """Refresh the records of the store's published broker-applied plans that are ``after_s`` old;
    the groups refreshed. With no such plan published, Kafka (and its Airflow connection
    ``kafka_conn_id``, used when no ``kafka_config`` is given) is not asked."""
    from rebalance_advisor.adapters.broker_plans import refresh_broker_plans

    with db.connect(url) as conn:
        in_force = published_plans_applied_by(conn, BROKER)
    if not in_force:
        return []
    if kafka_config is None:
        from rebalance_advisor.adapters.airflow_connections import DEFAULT_KAFKA_CONN_ID, kafka_client_config

        kafka_config = kafka_client_config(kafka_conn_id or DEFAULT_KAFKA_CONN_ID)
    return refresh_broker_plans(kafka_config, in_force, after_s, topic=topic, timeout=timeout)
