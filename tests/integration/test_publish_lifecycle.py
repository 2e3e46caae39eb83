"""The plan lifecycle on SQLite and PostgreSQL, publishing to a real broker (and to a dead one)."""

from __future__ import annotations

import socket
import threading
import uuid

import pytest
import sqlalchemy as sa
from rebalance_advisor.adapters.assignment_topic import KafkaUnavailable, read_topic
from rebalance_advisor.cli import main
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.services import plan_lifecycle, static_members
from rebalance_advisor.store import db
from rebalance_advisor.store.plan_models import PlanTransition
from rebalance_advisor.store.plans import get_plan, plan_assignment_map

from tests._plans import record_plan

SKEWED = [9000, 500, 400, 300, 200, 100]
OTHER = [100, 200, 300, 400, 500, 9000]


@pytest.fixture
def topic() -> str:
    """A fresh assignment topic per test: publishes never see another test's records."""
    return f"asg-{uuid.uuid4().hex[:10]}"


def _statuses(url: str, *plan_ids: int) -> list[str]:
    return [get_plan(i, url).status for i in plan_ids]


def _manual_assign(url: str, *groups: str) -> None:
    """Register w0 and w1 as the consumers of manual-assign ``groups`` (only those plans publish)."""
    for group in groups:
        for member in ("w0", "w1"):
            static_members.add(group, member, ["data"], url)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_transitions_legal_illegal_and_recorded(url: str) -> None:
    _manual_assign(url, "g", "h")
    first = record_plan(url, "g", ["w0", "w1"], SKEWED)
    done = plan_lifecycle.approve(first, "alice", url, airflow_run_id="manual__1", note="ok")
    assert (done.from_status, done.to_status, done.group_id) == ("recommended", "approved", "g")
    with pytest.raises(plan_lifecycle.IllegalTransition) as refused:
        plan_lifecycle.reject(first, "bob", url)
    assert str(refused.value).startswith(f"plan {first} is 'approved' and cannot become 'rejected'")
    assert "only a plan that is 'recommended' can become 'rejected'" in str(refused.value)
    assert "from 'approved' it can become 'published' or 'superseded'" in str(refused.value)
    with pytest.raises(plan_lifecycle.IllegalTransition, match="'approved' and cannot become 'approved'"):
        plan_lifecycle.approve(first, "bob", url)

    second = record_plan(url, "h", ["w0", "w1"], SKEWED)
    plan_lifecycle.reject(second, "bob", url, note="too many moves")
    with pytest.raises(plan_lifecycle.IllegalTransition, match="'rejected' is final"):
        plan_lifecycle.approve(second, "alice", url)

    transitions = get_plan(first, url).transitions
    assert [(t.from_status, t.to_status, t.actor, t.airflow_run_id, t.note) for t in transitions][1:] == [
        ("recommended", "approved", "alice", "manual__1", "ok")
    ]
    assert [t.to_status for t in get_plan(second, url).transitions] == ["recommended", "rejected"]


def test_unknown_plan_and_superseded_plan_are_refused(url: str, kafka_bootstrap: str, topic: str) -> None:
    with pytest.raises(plan_lifecycle.UnknownPlan, match="plan 4242 does not exist"):
        plan_lifecycle.approve(4242, "alice", url)
    with pytest.raises(plan_lifecycle.UnknownPlan, match="plan 4242 does not exist"):
        plan_lifecycle.publish(4242, {"bootstrap.servers": kafka_bootstrap}, "alice", url, topic=topic)
    older = record_plan(url, "g", ["w0", "w1"], SKEWED)
    newer = record_plan(url, "g", ["w0", "w1"], OTHER)  # the planner supersedes the older recommendation
    assert _statuses(url, older, newer) == ["superseded", "recommended"]
    with pytest.raises(plan_lifecycle.IllegalTransition) as refused:
        plan_lifecycle.approve(older, "alice", url)
    assert "'superseded' is final" in str(refused.value) and "a newer plan replaced it" in str(refused.value)
    # a recommended (not approved) plan does not publish
    with pytest.raises(
        plan_lifecycle.IllegalTransition, match="only a plan that is 'approved' can become 'published'"
    ):
        plan_lifecycle.publish(newer, {"bootstrap.servers": kafka_bootstrap}, "alice", url, topic=topic)
    assert _statuses(url, newer) == ["recommended"]


def test_two_approvers_race_one_wins(url: str) -> None:
    _manual_assign(url, "g")
    plan_id = record_plan(url, "g", ["w0", "w1"], SKEWED)
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def approve(actor: str) -> None:
        barrier.wait()
        try:
            plan_lifecycle.approve(plan_id, actor, url)
            outcomes.append("won")
        except AdvisorError as error:
            outcomes.append(f"refused: {error}")

    threads = [threading.Thread(target=approve, args=(a,)) for a in ("alice", "bob")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(o.split(":")[0] for o in outcomes) == ["refused", "won"], outcomes
    with db.connect(url) as conn:
        rows = conn.execute(
            sa.select(PlanTransition.to_status).where(
                PlanTransition.plan_id == plan_id, PlanTransition.to_status == "approved"
            )
        ).all()
    assert len(rows) == 1


def test_db_prune_keeps_plans_and_runs_of_pruned_snapshots(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Plans and advisor runs are history: they hold no foreign key to their snapshot, so retention
    deletes old snapshots without an FK error and without touching a plan of any status."""
    from datetime import UTC, datetime, timedelta

    from rebalance_advisor import store
    from rebalance_advisor.store.plans import advisor_runs, published_assignments

    from tests._planner import make_snapshot

    group = {"topics": {"data": [(9_000, 0), (500, 0)]}}
    old = store.write_snapshot(make_snapshot({"g": group}, datetime.now(UTC) - timedelta(days=30)), url)
    store.write_snapshot(make_snapshot({"g": group}), url)
    _manual_assign(url, "g", "h")
    published, approved, superseded = [
        record_plan(url, group_id, ["w0", "w1"], SKEWED, snapshot_id=old) for group_id in ("g", "h", "k")
    ]
    rejected = record_plan(url, "k", ["w0", "w1"], OTHER, snapshot_id=old)  # supersedes k's first plan
    plan_lifecycle.approve(published, "alice", url)
    with db.connect(url) as conn:
        plan_lifecycle.transition(
            conn, published, "published", "alice", expect=("approved",), values={"epoch": 1}
        )
    plan_lifecycle.approve(approved, "alice", url)
    plan_lifecycle.reject(rejected, "alice", url)
    statuses = _statuses(url, published, approved, superseded, rejected)
    assert statuses == ["published", "approved", "superseded", "rejected"]
    runs = len(advisor_runs(url))

    assert main(["db", "prune", "--retention-hours", "168", "--db", url]) == 0
    assert "pruned 1 snapshot(s)" in capsys.readouterr().out
    with pytest.raises(AdvisorError, match=f"snapshot {old} does not exist"):
        store.load_snapshot(old, url)
    assert _statuses(url, published, approved, superseded, rejected) == statuses
    assert len(advisor_runs(url)) == runs == 4
    with db.connect(url) as conn:  # the planner still measures g against its published plan
        assert published_assignments(conn) == {"g": plan_assignment_map(published, url)}


@pytest.mark.kafka
def test_publish_broker_down_then_retry_then_noop_then_superseded(
    url: str, kafka_bootstrap: str, topic: str
) -> None:
    config = {"bootstrap.servers": kafka_bootstrap}
    for member in ("w0", "w1", "w2"):
        static_members.add("g", member, ["data"], url)
    first = record_plan(url, "g", ["w0", "w1", "w2"], SKEWED)
    plan_lifecycle.approve(first, "alice", url)

    with pytest.raises(KafkaUnavailable, match="Nothing was published; retry"):
        plan_lifecycle.publish(
            first, {"bootstrap.servers": f"127.0.0.1:{_closed_port()}"}, "alice", url, topic=topic, timeout=3
        )
    plan = get_plan(first, url)
    assert (plan.status, plan.epoch) == ("approved", None)
    assert [t.to_status for t in plan.transitions] == ["recommended", "approved"]
    assert read_topic(config, topic, timeout=10).group("g") == {}

    done = plan_lifecycle.publish(first, config, "alice", url, airflow_run_id="manual__2", topic=topic)
    assert (done.changed, done.epoch) == (True, 1)
    plan = get_plan(first, url)
    assert (plan.status, plan.epoch) == ("published", 1)
    last = plan.transitions[-1]
    assert (last.from_status, last.to_status, last.actor, last.airflow_run_id) == (
        "approved", "published", "alice", "manual__2",
    )  # fmt: skip
    on_topic = read_topic(config, topic, timeout=10).group("g")
    planned = plan_assignment_map(first, url)
    assert {m: list(r.partitions) for m, r in on_topic.items() if r.partitions} == planned
    # a registered member the plan gives nothing still gets a record (empty), not silence
    assert set(on_topic) == {"w0", "w1", "w2"} and {r.epoch for r in on_topic.values()} == {1}

    again = plan_lifecycle.publish(first, config, "bob", url, topic=topic)
    assert (again.changed, again.epoch) == (False, 1)
    assert len(get_plan(first, url).transitions) == 3  # nothing recorded for the no-op
    assert read_topic(config, topic, timeout=10).group("g") == on_topic

    # The next plan drops w2 from the registry and from the plan: it is told it has nothing now.
    static_members.remove("g", "w2", url)
    second = record_plan(url, "g", ["w0", "w1"], OTHER)
    plan_lifecycle.approve(second, "alice", url)
    done = plan_lifecycle.publish(second, config, "alice", url, topic=topic)
    assert (done.changed, done.epoch, done.superseded) == (True, 2, (first,))
    assert _statuses(url, first, second) == ["superseded", "published"]
    assert "w2" in done.dropped
    on_topic = read_topic(config, topic, timeout=10).group("g")
    assert on_topic["w2"].partitions == () and on_topic["w2"].epoch == 2
    assert {m: list(r.partitions) for m, r in on_topic.items() if r.partitions} == plan_assignment_map(
        second, url
    )
    superseding = get_plan(first, url).transitions[-1]
    assert (superseding.from_status, superseding.to_status) == ("published", "superseded")
    with pytest.raises(plan_lifecycle.IllegalTransition, match="'superseded'"):
        plan_lifecycle.publish(first, config, "alice", url, topic=topic)


@pytest.mark.kafka
def test_publish_supersedes_a_newer_recommendation_too(url: str, kafka_bootstrap: str, topic: str) -> None:
    """Approved plan A, then a run recommends a different B: publishing A leaves nothing standing but A
    (B was measured against the assignment before A; the next run plans against A)."""
    _manual_assign(url, "g")
    first = record_plan(url, "g", ["w0", "w1"], SKEWED)
    plan_lifecycle.approve(first, "alice", url)
    newer = record_plan(url, "g", ["w0", "w1"], OTHER)  # an approved plan is not superseded by a run
    assert newer > first and _statuses(url, first, newer) == ["approved", "recommended"]
    done = plan_lifecycle.publish(first, {"bootstrap.servers": kafka_bootstrap}, "alice", url, topic=topic)
    assert done.superseded == (newer,)
    assert _statuses(url, first, newer) == ["published", "superseded"]
    note = get_plan(newer, url).transitions[-1].note
    assert f"plan {first} published at epoch 1" in note
    with pytest.raises(plan_lifecycle.IllegalTransition, match="'superseded' is final"):
        plan_lifecycle.approve(newer, "bob", url)


@pytest.mark.kafka
def test_auto_approve_publishes_manual_groups_only_and_retries(
    url: str, kafka_bootstrap: str, topic: str
) -> None:
    static_members.add("manual", "w0", ["data"], url)
    static_members.add("manual", "w1", ["data"], url)
    manual = record_plan(url, "manual", ["w0", "w1"], SKEWED)
    dynamic = record_plan(url, "dynamic", ["c0", "c1"], SKEWED)
    down = {"bootstrap.servers": f"127.0.0.1:{_closed_port()}"}
    with pytest.raises(KafkaUnavailable, match="1 of 1 plan"):
        plan_lifecycle.auto_approve_and_publish(
            [manual, dynamic], url, "scheduled__1", kafka_config=down, topic=topic, timeout=3
        )
    assert _statuses(url, manual, dynamic) == ["approved", "recommended"]
    outcome = plan_lifecycle.auto_approve_and_publish(
        [manual, dynamic],
        url,
        "scheduled__1",
        kafka_config={"bootstrap.servers": kafka_bootstrap},
        topic=topic,
    )  # the retry: approved already, so it only publishes
    assert outcome.advice_only == (dynamic,) and [p.plan_id for p in outcome.published] == [manual]
    assert _statuses(url, manual, dynamic) == ["published", "recommended"]
    transitions = get_plan(manual, url).transitions
    assert [(t.to_status, t.actor, t.airflow_run_id) for t in transitions[1:]] == [
        ("approved", "airflow", "scheduled__1"),
        ("published", "airflow", "scheduled__1"),
    ]


@pytest.mark.kafka
def test_cli_plan_status(
    sqlite_url: str, kafka_bootstrap: str, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db.upgrade(sqlite_url)
    _manual_assign(sqlite_url, "g")
    plan_id = str(record_plan(sqlite_url, "g", ["w0", "w1"], SKEWED))
    base = ["--db", sqlite_url]
    kafka = ["--bootstrap-servers", kafka_bootstrap, "--topic", topic]
    assert main(["plan-status", "publish", plan_id, *base, *kafka]) == 1
    assert "only a plan that is 'approved' can become 'published'" in capsys.readouterr().err
    assert main(["plan-status", "approve", plan_id, "--actor", "carol", "--publish", *base, *kafka]) == 0
    out = capsys.readouterr().out
    assert "recommended -> approved by carol" in out and "published at epoch 1 to 2 member(s)" in out
    assert main(["plan-status", "publish", plan_id, *base, *kafka]) == 0
    assert "already published at epoch 1" in capsys.readouterr().out
    assert main(["plan-status", "show", plan_id, *base]) == 0
    out = capsys.readouterr().out
    assert f"plan {plan_id} of group g: published, epoch 1; next: superseded" in out
    assert "approved -> published  by carol" in out
    assert main(["plan-status", "reject", "999", *base]) == 1
    assert "plan 999 does not exist" in capsys.readouterr().err


@pytest.mark.kafka
def test_dynamic_group_plan_is_advice_only(
    sqlite_url: str, kafka_bootstrap: str, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A subscribe() group's plan is neither approved nor published, by the service or the CLI,
    until the group is registered as manual-assign; nothing reaches the topic before that."""
    from rebalance_advisor.store.plan_models import Plan

    url = sqlite_url
    db.upgrade(url)
    config = {"bootstrap.servers": kafka_bootstrap}
    plan_id = record_plan(url, "dyn", ["w0", "w1"], SKEWED)
    with pytest.raises(plan_lifecycle.AdviceOnly, match=r"group 'dyn', a dynamic \(subscribe\(\)\) group"):
        plan_lifecycle.approve(plan_id, "alice", url)
    base = ["--db", url, "--bootstrap-servers", kafka_bootstrap, "--topic", topic]
    assert main(["plan-status", "approve", str(plan_id), "--publish", *base]) == 1
    err = capsys.readouterr().err
    assert "advice only" in err and "manual-assign" in err and len(err.strip().splitlines()) == 1
    assert _statuses(url, plan_id) == ["recommended"]

    # approved before this rule existed (or unregistered since): publishing still refuses, before Kafka
    with db.connect(url) as conn:
        conn.execute(sa.update(Plan).where(Plan.id == plan_id).values(status="approved"))
    with pytest.raises(plan_lifecycle.AdviceOnly, match="advice only"):
        plan_lifecycle.publish(plan_id, config, "alice", url, topic=topic)
    assert main(["plan-status", "publish", str(plan_id), *base]) == 1
    assert "advice only" in capsys.readouterr().err
    assert _statuses(url, plan_id) == ["approved"]
    assert read_topic(config, topic, timeout=10).group("dyn") == {}

    _manual_assign(url, "dyn")  # now the operator says these consumers assign() what we publish
    assert main(["plan-status", "publish", str(plan_id), *base]) == 0
    assert _statuses(url, plan_id) == ["published"]
    assert set(read_topic(config, topic, timeout=10).group("dyn")) == {"w0", "w1"}


def test_db_prune_drops_old_advisor_history_but_keeps_standing_plans(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Plan retention: runs older than the retention go with their outcomes and their superseded,
    rejected plans (assignments and transitions too); a standing plan keeps itself and its run;
    the newest run always stays."""
    from datetime import UTC, datetime, timedelta

    from rebalance_advisor.store.plan_models import AdvisorRun, GroupOutcome, Plan, PlanAssignment

    _manual_assign(url, "a")
    superseded = record_plan(url, "s", ["w0", "w1"], SKEWED)
    record_plan(url, "s", ["w0", "w1"], OTHER)  # supersedes the first: standing, in an old run
    rejected = record_plan(url, "r", ["w0", "w1"], SKEWED)
    plan_lifecycle.reject(rejected, "alice", url)
    approved = record_plan(url, "a", ["w0", "w1"], SKEWED)
    plan_lifecycle.approve(approved, "alice", url)
    recent = record_plan(url, "n", ["w0", "w1"], SKEWED)
    newest_old = record_plan(url, "z", ["w0", "w1"], SKEWED)
    plan_lifecycle.reject(newest_old, "alice", url)
    old_plans = [superseded, superseded + 1, rejected, approved, newest_old]
    with db.connect(url) as conn:
        run_of = {plan: run for plan, run in conn.execute(sa.select(Plan.id, Plan.run_id))}
        long_ago = datetime.now(UTC) - timedelta(days=40)
        conn.execute(
            sa.update(AdvisorRun)
            .where(AdvisorRun.id.in_([run_of[p] for p in old_plans]))
            .values(started_at=long_ago)
        )
    assert main(["db", "prune", "--db", url, "--plan-retention-hours", "720"]) == 0
    out = capsys.readouterr().out
    # by hand: superseded + rejected go (newest_old's run is the newest run: kept, rejected or not);
    # outcomes of the 3 old runs not kept as newest; runs of superseded and rejected go
    assert "pruned 2 plan(s), 4 outcome(s) and 2 advisor run(s) older than 720 h" in out, out
    assert get_plan(superseded, url) is None and get_plan(rejected, url) is None
    assert _statuses(url, superseded + 1, approved, recent, newest_old) == [
        "recommended", "approved", "recommended", "rejected",
    ]  # fmt: skip
    with db.connect(url) as conn:
        assert (
            conn.execute(
                sa.select(sa.func.count()).where(PlanAssignment.plan_id.in_([superseded, rejected]))
            ).scalar_one()
            == 0
        )
        assert conn.execute(sa.select(sa.func.count()).select_from(PlanTransition).where(
            PlanTransition.plan_id.in_([superseded, rejected]))).scalar_one() == 0  # fmt: skip
        runs_left = set(conn.execute(sa.select(AdvisorRun.id)).scalars())
        assert runs_left == {run_of[p] for p in (superseded + 1, approved, recent, newest_old)}
        outcome_runs = set(conn.execute(sa.select(GroupOutcome.run_id)).scalars())
        assert outcome_runs == {run_of[recent], run_of[newest_old]}
    assert main(["db", "prune", "--db", url, "--plan-retention-hours", "720"]) == 0
    assert "pruned 0 plan(s), 0 outcome(s) and 0 advisor run(s)" in capsys.readouterr().out
