"""The advisor DAG's ``capacity_pass`` task: Airflow's own TriggerDagRunOperator, told at run time
whether and when to trigger the snapshot DAG (services/capacity_pass.py)."""

from __future__ import annotations

from typing import Any

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk.exceptions import AirflowSkipException

from rebalance_advisor.dag_tasks import advisor_tasks
from rebalance_advisor.domain.parameters import SNAPSHOT_DAG_ID


class CapacityPassTrigger(TriggerDagRunOperator):
    """Triggers ``kafka_offsets_snapshot`` to run at the capacity pass's time after the upstream
    publishing task published plans made on unknown capacities; skipped when none is due.
    ``params_model``: the DAG's parameter model (default: the advisor's)."""

    def __init__(
        self,
        *,
        publishing_task_id: str = "hand_to_publishing",
        params_model: Any = None,
        task_id: str = "capacity_pass",
        **kwargs: Any,
    ) -> None:
        super().__init__(task_id=task_id, trigger_dag_id=SNAPSHOT_DAG_ID, **kwargs)
        self.publishing_task_id, self.params_model = publishing_task_id, params_model

    def execute(self, context: Any) -> Any:
        handed = context["ti"].xcom_pull(task_ids=self.publishing_task_id)
        due = advisor_tasks.capacity_pass_due(handed, context["params"], self.params_model)
        if due is None:
            raise AirflowSkipException("no capacity pass due")
        self.run_after, self.note = due["run_after"], due["note"]
        return super().execute(context)
