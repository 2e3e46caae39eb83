"""The advisor DAG's ``capacity_pass`` task: Airflow's own TriggerDagRunOperator, told at run time
whether and when to trigger the snapshot DAG (services/capacity_pass.py)."""

from __future__ import annotations

from typing import Any

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk.exceptions import AirflowSkipException

from rebalance_advisor.dag_tasks import advisor_tasks
from rebalance_advisor.domain.parameters import SNAPSHOT_DAG_ID


class CapacityPassTrigger(TriggerDagRunOperator):
    """Triggers ``kafka_offsets_snapshot`` to run at one of the capacity pass's times after the
    upstream publishing task published plans made on unknown capacities; skipped when that one is not
    due. ``stage``: ``"run_after"`` (the snapshot that measures the members the plans loaded) or
    ``"settle_after"`` (the one before it, once the handovers are over). ``params_model``: the DAG's
    parameter model (default: the advisor's)."""

    def __init__(
        self,
        *,
        publishing_task_id: str = "hand_to_publishing",
        params_model: Any = None,
        stage: str = "run_after",
        task_id: str = "capacity_pass",
        **kwargs: Any,
    ) -> None:
        super().__init__(task_id=task_id, trigger_dag_id=SNAPSHOT_DAG_ID, **kwargs)
        self.publishing_task_id, self.params_model, self.stage = publishing_task_id, params_model, stage

    def execute(self, context: Any) -> Any:
        handed = context["ti"].xcom_pull(task_ids=self.publishing_task_id)
        due = advisor_tasks.capacity_pass_due(handed, context["params"], self.params_model)
        if due is None or due[self.stage] is None:
            raise AirflowSkipException("no capacity pass due")
        self.run_after, self.note = due[self.stage], due["note"]
        return super().execute(context)


def capacity_pass_triggers(**kwargs: Any) -> list[CapacityPassTrigger]:
    """The capacity pass's two tasks (docs/architecture.md, "The capacity pass"): ``capacity_pass_settle``,
    a snapshot once the plans' handovers are over, and ``capacity_pass``, the one that measures the
    members they loaded. ``kwargs``: as :class:`CapacityPassTrigger`'s."""
    return [
        CapacityPassTrigger(stage="settle_after", task_id="capacity_pass_settle", **kwargs),
        CapacityPassTrigger(stage="run_after", task_id="capacity_pass", **kwargs),
    ]
