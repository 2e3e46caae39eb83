"""Publishing under real Airflow (``dag.test()``): the members form, the approval DAG, and the
advisor in ``static`` publish mode driving real ``AssignedConsumer`` processes to the new plan."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests._plans import record_plan
from tests.support.dag_imports import heavy_modules_after_parsing

DAGS = Path(__file__).resolve().parents[2] / "dags"
pytestmark = [
    pytest.mark.airflow,
    pytest.mark.slow,
    pytest.mark.connections(kafka=True, spark=True, upgrade=True),
]


def _dag(name: str):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS / f"{name}.py"))
    assert not bag.import_errors, bag.import_errors
    return bag.dags[name]


def _states(run) -> dict[str, str]:
    return {ti.task_id: ti.state for ti in run.get_task_instances()}


def _snapshot_runs_after(since: datetime, group: str) -> list[tuple[str, str, datetime, str | None]]:
    """(run type, state, run after, note) of the snapshot DAG's runs due after ``since`` whose note
    names ``group`` (the session's one metadata DB holds other tests' runs)."""
    import sqlalchemy as sa
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        runs = session.scalars(
            sa.select(DagRun).where(DagRun.dag_id == "kafka_offsets_snapshot", DagRun.run_after > since)
        ).all()
        return [(r.run_type, r.state, r.run_after, r.note) for r in runs if group in (r.note or "")]


@pytest.mark.parametrize("name", ["kafka_static_members", "kafka_plan_approval"])
def test_dag_files_import_nothing_heavy(name: str) -> None:
    heavy = ("confluent_kafka", "alembic", "pyspark", "pandas", "numpy")
    assert heavy_modules_after_parsing(DAGS / f"{name}.py", heavy) == set()


def test_static_members_form(airflow_home, connections: str) -> None:
    from airflow.sdk.definitions.param import ParamValidationError
    from rebalance_advisor.services import static_members

    dag = _dag("kafka_static_members")
    good = {"group_id": "orders", "member_id": "w-0", "topics": ["orders-in"]}
    for bad in (
        {**good, "action": "rename"},
        {**good, "group_id": ""},
        {**good, "member_id": " w-0"},
        {**good, "topics": ["has space"]},
        {**good, "topics": "orders-in"},
        {"member_id": "w-0", "topics": ["orders-in"]},  # group id missing
    ):
        with pytest.raises(ParamValidationError):
            dag.test(run_conf=bad)
    for field in ("action", "group_id", "member_id", "topics"):
        assert dag.params.get_param(field).description

    assert dag.test(run_conf={**good, "action": "add"}).state == "success"
    assert [(m.group_id, m.member_id, m.topics) for m in static_members.list_members(url=connections)] == [
        ("orders", "w-0", ("orders-in",))
    ]
    assert dag.test(run_conf={**good, "action": "add"}).state == "failed"  # registered twice
    assert dag.test(run_conf={**good, "action": "add", "topics": []}).state == "failed"  # add needs topics
    assert dag.test(run_conf={**good, "action": "remove", "topics": []}).state == "success"
    assert static_members.list_members(url=connections) == []
    assert dag.test(run_conf={**good, "action": "remove"}).state == "failed"  # unknown member


def test_hitl_answer_becomes_the_decision() -> None:
    from rebalance_advisor.dag_tasks import publishing_tasks
    from rebalance_advisor.errors import AdvisorError

    assert publishing_tasks.route({"decision": "ask"}) == publishing_tasks.DESCRIBE_TASK
    assert (
        publishing_tasks.route({"decision": "approve"})
        == publishing_tasks.route({"decision": "reject"})
        == publishing_tasks.APPLY_TASK
    )
    assert publishing_tasks.decision_of({"decision": "reject", "note": "no"}, None) == ("reject", None, "no")
    answer = {
        "chosen_options": ["Approve"],
        "params_input": {},
        "responded_by_user": {"id": "7", "name": "dana"},
    }
    assert publishing_tasks.decision_of({"decision": "ask", "note": None}, answer) == (
        "approve",
        "dana",
        None,
    )
    assert (
        publishing_tasks.decision_of({"decision": "ask"}, {**answer, "chosen_options": ["Reject"]})[0]
        == "reject"
    )
    with pytest.raises(AdvisorError, match="no answer"):
        publishing_tasks.decision_of({"decision": "ask"}, None)


@pytest.mark.kafka
def test_plan_approval_dag(
    airflow_home, connections: str, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.sdk.definitions.param import ParamValidationError
    from rebalance_advisor.adapters.assignment_topic import read_topic
    from rebalance_advisor.dag_tasks import publishing_tasks
    from rebalance_advisor.services import static_members
    from rebalance_advisor.store.plans import get_plan
    from rebalance_advisor_client.assignment_records import DEFAULT_TOPIC

    dag = _dag("kafka_plan_approval")
    assert dag.params["decision"] == "ask"
    assert dag.params.get_param("decision").schema["enum"] == list(publishing_tasks.DECISIONS)
    assert dag.get_task("ask_a_person").options == list(publishing_tasks.HITL_OPTIONS)
    for bad in (
        {"plan_id": 0, "decision": "approve"},
        {"plan_id": 1, "decision": "maybe"},
        {"decision": "approve"},
    ):
        with pytest.raises(ParamValidationError):
            dag.test(run_conf=bad)

    url = connections
    group = f"approval-{uuid.uuid4().hex[:8]}"
    static_members.add(group, "w0", ["data"], url)
    static_members.add(group, "w1", ["data"], url)
    rejected = record_plan(url, group, ["w0", "w1"], [5000, 100, 100, 100])
    run = dag.test(run_conf={"plan_id": rejected, "decision": "reject", "note": "not now"})
    assert run.state == "success" and _states(run)["ask_a_person"] == "skipped"
    last = get_plan(rejected, url).transitions[-1]
    assert (last.to_status, last.actor, last.airflow_run_id, last.note) == (
        "rejected", "dag_test", run.run_id, "not now",
    )  # fmt: skip

    # A rejection holds the group's next equal plan back until its situation changes
    # (docs/operations/plan-lifecycle.md), so the approval is tried on a second static group.
    group = f"approval-{uuid.uuid4().hex[:8]}"
    static_members.add(group, "w0", ["data"], url)
    static_members.add(group, "w1", ["data"], url)
    plan_id = record_plan(url, group, ["w0", "w1"], [100, 5000, 100, 100])
    monkeypatch.setenv("REBALANCE_ADVISOR_SNAPSHOT_SCHEDULE", "0 0 1 1 *")  # next: far away
    before = datetime.now(UTC)
    run = dag.test(run_conf={"plan_id": plan_id, "decision": "approve"})
    assert run.state == "success", _states(run)
    # planned without capacities and published now: the snapshot DAG is triggered 40 s later (the
    # handovers over) and 120 s after that (which measures the members the plan loaded)
    assert _states(run)["capacity_pass"] == _states(run)["capacity_pass_settle"] == "success"
    runs = sorted(_snapshot_runs_after(before, group), key=lambda r: r[2])
    note = f"capacity pass: plans published on unknown capacities for {group}"
    assert [(run_type, state, n) for run_type, state, _, n in runs] == [
        ("operator_triggered", "queued", note)
    ] * 2
    now = datetime.now(UTC)
    for (_, _, run_after, _), seconds in zip(runs, (40, 160), strict=True):
        assert before + timedelta(seconds=seconds) <= run_after <= now + timedelta(seconds=seconds)
    plan = get_plan(plan_id, url)
    assert plan.status == "published" and plan.epoch >= 1
    assert [(t.to_status, t.airflow_run_id) for t in plan.transitions[1:]] == [
        ("approved", run.run_id),
        ("published", run.run_id),
    ]
    on_topic = read_topic({"bootstrap.servers": kafka_bootstrap}, DEFAULT_TOPIC).group(group)
    assert {r.plan_id for r in on_topic.values()} == {str(plan_id)} and set(on_topic) == {"w0", "w1"}
    # again: a no-op (the plan is published), not an error, and no second pass
    again = dag.test(run_conf={"plan_id": plan_id, "decision": "approve"})
    assert again.state == "success" and _states(again)["capacity_pass"] == "skipped"
    assert _states(again)["capacity_pass_settle"] == "skipped"
    assert len(_snapshot_runs_after(before, group)) == 2
    assert len(get_plan(plan_id, url).transitions) == 3
    # refused transitions and unknown plans fail the run at once (no retries)
    started = time.monotonic()
    assert dag.test(run_conf={"plan_id": rejected, "decision": "approve"}).state == "failed"
    assert dag.test(run_conf={"plan_id": 987654, "decision": "reject"}).state == "failed"
    assert time.monotonic() - started < 30

    # a dynamic (subscribe()) group's plan is advice only: refused at once, nothing published
    dynamic_group = f"dynamic-{uuid.uuid4().hex[:8]}"
    dynamic = record_plan(url, dynamic_group, ["c0", "c1"], [5000, 100, 100, 100])
    run = dag.test(run_conf={"plan_id": dynamic, "decision": "approve"})
    assert run.state == "failed" and _states(run)["apply_decision"] == "failed"
    assert get_plan(dynamic, url).status == "recommended"
    assert read_topic({"bootstrap.servers": kafka_bootstrap}, DEFAULT_TOPIC).group(dynamic_group) == {}


def _skewed_group(bootstrap: str, topic: str, group: str, counts: list[int]) -> None:
    """Produce ``counts[p]`` records to partition p and commit offset 0 for the group (memberless)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for partition, count in enumerate(counts):
        for i in range(count):
            producer.produce(topic, f"seed{i}".encode(), partition=partition)
        producer.poll(0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, 0) for p in range(len(counts))], asynchronous=False)
    finally:
        consumer.close()


@pytest.mark.kafka
@pytest.mark.spark
def test_advisor_static_mode_end_to_end(
    airflow_home, connections: str, kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Snapshot -> advisor DAG (publish mode static) -> auto-approved, published -> consumers move.
    The plan was made before any member's capacity was known: the run triggers the snapshot DAG to
    run 40 s and 160 s later (the capacity pass), as the schedule's next snapshot comes later."""
    from rebalance_advisor import store
    from rebalance_advisor.adapters import kafka_snapshot
    from rebalance_advisor.services import static_members
    from rebalance_advisor.store.plans import get_plan, plan_assignment_map, run_outcomes
    from rebalance_advisor_client.assignment_records import DEFAULT_TOPIC

    from tests.integration.test_client_handover import PARTITIONS, Scenario
    from tests.support import handover as h

    url = connections
    scenario = Scenario(kafka_bootstrap, tmp_path)
    scenario.assignments = DEFAULT_TOPIC  # where the DAG publishes
    try:
        seeded = [3000, 100, 100, 100, 100, 100]
        _skewed_group(kafka_bootstrap, scenario.topic, scenario.group, seeded)
        scenario.producer.sent = sum(seeded)  # drain() checks every record on the topic was processed
        for member in ("w0", "w1", "w2"):
            static_members.add(scenario.group, member, [scenario.topic], url)
        options = kafka_snapshot.SnapshotOptions(groups=kafka_snapshot.GroupFilter.parse(scenario.group))
        store.write_snapshot(kafka_snapshot.collect(kafka_bootstrap, {}, options), url)

        # The consumers run an initial hand-made assignment while the advisor plans.
        assert scenario.publish("initial", {"w0": [0, 1], "w1": [2, 3], "w2": [4, 5]}).epoch == 1
        scenario.start(["w0", "w1", "w2"], takeover_timeout=60)
        for member, parts in (("w0", [0, 1]), ("w1", [2, 3]), ("w2", [4, 5])):
            scenario.wait_progress([member], parts, timeout=60)

        monkeypatch.setenv("REBALANCE_ADVISOR_SNAPSHOT_SCHEDULE", "0 0 1 1 *")  # next: far away
        before = datetime.now(UTC)
        run = _dag("kafka_rebalance_advisor").test(
            run_conf={"publish_mode": "static", "group_regex": scenario.group, "cooldown_minutes": 0}
        )
        after = datetime.now(UTC)
        assert run.state == "success", _states(run)
        assert _states(run)["capacity_pass"] == _states(run)["capacity_pass_settle"] == "success"
        runs = sorted(_snapshot_runs_after(before, scenario.group), key=lambda r: r[2])
        assert len(runs) == 2
        for (run_type, state, run_after, note), seconds in zip(runs, (40, 160), strict=True):
            # the scheduler starts each at its run_after
            assert (run_type, state) == ("operator_triggered", "queued")
            assert before + timedelta(seconds=seconds) <= run_after <= after + timedelta(seconds=seconds)
            assert note.startswith("capacity pass: ") and scenario.group in note
        (outcome,) = run_outcomes(None, url)
        assert outcome.outcome == "recommended", outcome
        plan = get_plan(outcome.plan_id, url)
        assert (plan.status, plan.epoch) == ("published", 2)  # after the topic's epoch 1
        assert [(t.to_status, t.actor, t.airflow_run_id) for t in plan.transitions] == [
            ("recommended", run.run_id, run.run_id),
            ("approved", "airflow", run.run_id),
            ("published", "airflow", run.run_id),
        ]
        planned = {p: member for member, parts in plan_assignment_map(plan.id, url).items() for _, p in parts}
        assert sorted(planned) == list(range(PARTITIONS))
        assert planned != {0: "w0", 1: "w0", 2: "w1", 3: "w1", 4: "w2", 5: "w2"}  # the plan moves something

        # Every partition ends up consumed by its planned owner at the new epoch.
        def following() -> bool:
            latest = {x.partition: x for x in scenario.lines()}
            return all(
                p in latest and (latest[p].member, latest[p].epoch) == (m, 2) for p, m in planned.items()
            )

        h.wait_for(following, 60, "consumers running the published plan")
        missing, seen = scenario.drain(timeout=60)
        assert not missing
        assert [pair for pair, count in seen.items() if count > 1] == []  # a normal handover: no duplicates
        assert h.out_of_order(scenario.lines()) == []
        assert scenario.watch.backwards() == []
        assert {p: owners[-1] for p, owners in h.owners(scenario.lines()).items()} == planned
    finally:
        scenario.close()


def _respond_when_asked(
    dag_id: str,
    option: str,
    username: str,
    done,
    problems: list[str],
    timeout: float = 120.0,
    prompts: list[tuple[str, str | None]] | None = None,
) -> None:
    """A person answering in the UI: the core API's own HITL response handler, called in-process
    (only its HTTP and auth layers are left out) once the task waits for input. If answering fails
    or nobody answered within ``timeout``, the waiting task is failed instead, so ``dag.test()`` cannot hang."""
    import sqlalchemy as sa
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from airflow.api_fastapi.core_api.datamodels.hitl import UpdateHITLDetailPayload
    from airflow.api_fastapi.core_api.routes.public.hitl import update_hitl_detail
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    query = sa.select(TaskInstance).where(
        TaskInstance.dag_id == dag_id,
        TaskInstance.task_id == "ask_a_person",
        TaskInstance.state == "awaiting_input",
    )
    deadline = time.monotonic() + timeout
    while not done.is_set():
        with create_session() as session:
            waiting = session.scalars(query).first()
            if waiting is not None and time.monotonic() > deadline:
                problems.append("nobody answered in time: the waiting task was failed")
                waiting.state = "failed"
                return
            if waiting is not None:
                if prompts is not None:  # what the person read: the rendered subject and body
                    from airflow.models.hitl import HITLDetail

                    detail = session.scalars(
                        sa.select(HITLDetail).where(HITLDetail.ti_id == waiting.id)
                    ).one()
                    prompts.append((detail.subject, detail.body))
                try:
                    update_hitl_detail(
                        dag_id=dag_id,
                        dag_run_id=waiting.run_id,
                        task_id="ask_a_person",
                        update_hitl_detail_payload=UpdateHITLDetailPayload(chosen_options=[option]),
                        user=SimpleAuthManagerUser(username=username, role="admin"),
                        session=session,
                    )
                    return
                except Exception as error:  # noqa: BLE001 - reported by the test, never a hang
                    problems.append(repr(error))
                    session.rollback()
                    deadline = 0.0  # next pass fails the waiting task
                    continue
        done.wait(0.5)


@pytest.mark.kafka
def test_plan_approval_asks_a_person(airflow_home, connections: str) -> None:
    """decision=ask: the run parks at the HITL task until a person answers; the answer is applied."""
    import threading

    from rebalance_advisor.services import static_members
    from rebalance_advisor.store.plans import get_plan

    url = connections
    group = f"hitl-{uuid.uuid4().hex[:8]}"
    static_members.add(group, "w0", ["data"], url)
    static_members.add(group, "w1", ["data"], url)
    plan_id = record_plan(url, group, ["w0", "w1"], [100, 100, 5000, 100])
    dag = _dag("kafka_plan_approval")
    done = threading.Event()
    problems: list[str] = []
    prompts: list[tuple[str, str | None]] = []
    responder = threading.Thread(
        target=_respond_when_asked,
        args=(dag.dag_id, "Approve", "erin", done, problems),
        kwargs={"prompts": prompts},
        daemon=True,
    )
    responder.start()
    try:
        run = dag.test(run_conf={"plan_id": plan_id, "decision": "ask"})
    finally:
        done.set()
        responder.join(10)
    assert not problems and run.state == "success", (problems, _states(run))
    assert _states(run)["ask_a_person"] == "success"
    # the prompt names the group, the moves (nothing owned yet: every partition is handed over) and
    # the predicted effect: 5,000 alone, the three 100s on the other member
    ((subject, body),) = prompts
    assert subject == f"Approve plan {plan_id} for consumer group {group}: 4 partition move(s)?"
    assert f"**Group `{group}`**" in body and "applied as **static assignments**" in body
    assert "- `data-2` (lag 5,000): (unowned) → w" in body
    assert "max member lag 0 → 5,000; lag no member owns 5,300 → 0" in body
    plan = get_plan(plan_id, url)
    assert plan.status == "published"
    assert [(t.to_status, t.actor) for t in plan.transitions[1:]] == [
        ("approved", "erin"),
        ("published", "erin"),
    ]
