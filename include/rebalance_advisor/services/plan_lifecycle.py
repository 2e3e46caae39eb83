"""Plan lifecycle: who may move a plan where, recorded, race-free; and publishing approved plans.

    recommended -> approved -> published -> superseded
    recommended -> rejected          (skipped, rejected and superseded are final)

Every status change writes a ``plan_transitions`` row (actor, Airflow run, time, note) in the
same transaction, under a row lock (``SELECT ... FOR UPDATE`` on PostgreSQL) and a conditional
``UPDATE ... WHERE status = <the status read>``, so of two concurrent approvers exactly one wins.

Only plans that reach their consumers may become ``approved`` or ``published``
(:func:`require_applied`, checked in :func:`transition` and before :func:`publish` writes to Kafka):
those of manual-assign groups (registered static members: *static assignments*) and those of
KIP-848 groups whose group assignor is the broker plugin's (*broker assignor*); the rule is
``domain/apply_mode.py``. Any other group's plan is advice only, whichever entry point asks (the
approval DAG, ``plan-status``, the web API). The plan's ``apply_mode`` column is set again at each.

Publishing (:func:`publish`) writes to Kafka first (static assignments: one Kafka transaction of
member records; broker assignor: the group's plan record, then a re-assignment trigger) and only
then, in one DB transaction, stores the epoch, marks the plan ``published`` and every other standing
plan of the group ``superseded`` (older and newer: a newer recommendation was measured against the
assignment in force before this publish). If the broker is down nothing changes (the plan stays ``approved``);
if the process dies between Kafka and the DB, a retry finds the plan on the topic already (the
publisher's no-op) and completes the DB side. A broker-applied plan written but not re-assigned
(the trigger failed) is ``published`` — the broker applies it at the group's next re-assignment —
and publishing it again repeats the trigger.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.engine import Connection

from rebalance_advisor.adapters import assignment_topic
from rebalance_advisor.domain.apply_mode import BROKER, STATIC, ApplyMode, is_applied
from rebalance_advisor.domain.broker_plan_record import BROKER_PLAN_TOPIC
from rebalance_advisor.domain.decisions import STANDING_STATUSES
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.store import db, plan_transitions, static_members_table
from rebalance_advisor.store.group_protocols import current_apply_mode, member_identities_of_plan
from rebalance_advisor.store.plan_models import PLAN_STATUSES
from rebalance_advisor.store.plan_records import PlanTransitionRecord
from rebalance_advisor.store.plans import plan_assignment_map

log = logging.getLogger(__name__)

#: status -> the statuses it may move to. ``recommended -> superseded`` is the planner's (a newer
#: recommendation for the group); ``approved -> superseded`` happens when another plan of the group is published.
TRANSITIONS: dict[str, tuple[str, ...]] = {
    "recommended": ("approved", "rejected", "superseded"),
    "approved": ("published", "superseded"),
    "published": ("superseded",),
    "superseded": (),
    "rejected": (),
    "skipped": (),
}
assert set(TRANSITIONS) == set(PLAN_STATUSES)

AUTO_ACTOR = "airflow"


class UnknownPlan(AdvisorError):
    """No plan has this id."""


class IllegalTransition(AdvisorError):
    """The plan's status does not allow the requested change (the message says what does)."""


class AdviceOnly(IllegalTransition):
    """The plan is of a group nothing we write reaches: advice only, never approved or published."""


#: the statuses that lead to a publish: only plans that reach their consumers get there
PUBLISHING_STATUSES = ("approved", "published")


def is_manual_assign(conn: Connection, group_id: str) -> bool:
    """Whether ``group_id`` has registered static members (its plans are static assignments)."""
    return bool(static_members_table.member_ids(conn, group_id))


def require_applied(conn: Connection, plan_id: int, group_id: str) -> ApplyMode:
    """The group's apply mode now; AdviceOnly when it is advice only.

    Why: the consumers of a plain dynamic group take their partitions from Kafka's group assignor and
    read nothing we write, so publishing would be a second, conflicting truth nobody follows.
    """
    mode = current_apply_mode(conn, group_id)
    if is_applied(mode):
        return mode
    raise AdviceOnly(
        f"plan {plan_id} is for group {group_id!r}, a dynamic (subscribe()) group: its consumers take "
        "their partitions from Kafka's group assignor, so the plan is advice only and is not approved "
        "or published; to apply it, move the consumers to group.protocol=consumer with "
        "group.remote.assignor=advised (the broker plugin), or register them as manual-assign "
        "(`rebalance-advisor members add` or the kafka_static_members DAG)"
    )


@dataclass(frozen=True)
class Transition(PlanTransitionRecord):
    """A status change just made: the transition row, and which plan of which group it moved."""

    plan_id: int
    group_id: str


@dataclass(frozen=True)
class Published:
    """What :func:`publish` did: ``changed`` False when the plan was published already."""

    plan_id: int
    group_id: str
    epoch: int
    changed: bool
    members: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    superseded: tuple[int, ...] = ()
    apply_mode: str = STATIC
    #: broker assignor only: whether the plan was seen in force, and what the re-assignment did
    in_force: bool | None = None
    reassignment: str | None = None
    #: seconds from the trigger until the plan was in force (broker assignor, when it was)
    in_force_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


@dataclass(frozen=True)
class AutoPublished:
    """What :func:`auto_approve_and_publish` did: plans published, plans of dynamic groups left as
    advice, plans that stay approved because Kafka was down."""

    published: tuple[Published, ...] = ()
    advice_only: tuple[int, ...] = ()
    failed: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The XCom form."""
        return {
            "published": [p.to_dict() for p in self.published],
            "advice_only": list(self.advice_only),
            "failed": list(self.failed),
        }


def allowed_from(status: str) -> tuple[str, ...]:
    return TRANSITIONS.get(status, ())


def _refusal(plan_id: int, status: str, target: str) -> IllegalTransition:
    sources = [s for s, targets in TRANSITIONS.items() if target in targets]
    allowed = allowed_from(status)
    text = (
        f"plan {plan_id} is {status!r} and cannot become {target!r}: only a plan that is "
        + " or ".join(repr(s) for s in sources)
        + f" can become {target!r}; "
        + (
            f"from {status!r} it can become " + " or ".join(repr(s) for s in allowed)
            if allowed
            else f"{status!r} is final"
        )
    )
    if status == "superseded":
        text += " (a newer plan replaced it: approve the group's current plan instead)"
    return IllegalTransition(text)


def _locked(conn: Connection, plan_id: int) -> tuple[str, str]:
    """(status, group id) of the plan, its row locked until the transaction ends (PostgreSQL)."""
    found = plan_transitions.lock_plan_status(conn, plan_id)
    if found is None:
        raise UnknownPlan(f"plan {plan_id} does not exist")
    return found


def transition(
    conn: Connection,
    plan_id: int,
    to_status: str,
    actor: str,
    *,
    airflow_run_id: str | None = None,
    note: str | None = None,
    expect: Iterable[str] | None = None,
    values: Mapping[str, Any] | None = None,
) -> Transition:
    """Move one plan to ``to_status`` on the caller's transaction, with its transition row.

    ``expect`` narrows the legal sources further (e.g. publishing needs ``approved``); ``values``
    are extra plan columns to set in the same UPDATE (the epoch).
    """
    if to_status not in PLAN_STATUSES:
        raise AdvisorError(f"unknown plan status {to_status!r}; statuses: {', '.join(PLAN_STATUSES)}")
    if not actor or not str(actor).strip():
        raise AdvisorError("a transition needs an actor (who decided)")
    status, group_id = _locked(conn, plan_id)
    if to_status not in allowed_from(status) or (expect is not None and status not in set(expect)):
        raise _refusal(plan_id, status, to_status)
    if to_status in PUBLISHING_STATUSES:
        values = {**(values or {}), "apply_mode": require_applied(conn, plan_id, group_id)}
    if not plan_transitions.set_plan_status(
        conn, plan_id, status, to_status, values
    ):  # SQLite has no row locks: another writer changed it since our read
        raise IllegalTransition(f"plan {plan_id} changed status concurrently; read it again and retry")
    now = datetime.now(UTC)
    plan_transitions.insert_transition_row(
        conn, plan_id, status, to_status, str(actor), airflow_run_id, now, note
    )
    return Transition(
        from_status=status, to_status=to_status, actor=str(actor), airflow_run_id=airflow_run_id, at=now,
        note=note, plan_id=plan_id, group_id=group_id,
    )  # fmt: skip


def _decide(
    plan_id: int, to_status: str, actor: str, url: str | None, airflow_run_id: str | None, note: str | None
) -> Transition:
    with db.connect(url) as conn:
        result = transition(conn, plan_id, to_status, actor, airflow_run_id=airflow_run_id, note=note)
    log.info("plan %s: %s -> %s by %s", plan_id, result.from_status, to_status, actor)
    return result


def approve(
    plan_id: int,
    actor: str,
    url: str | None = None,
    *,
    airflow_run_id: str | None = None,
    note: str | None = None,
) -> Transition:
    """``recommended -> approved``; anything else is refused with the reason."""
    return _decide(plan_id, "approved", actor, url, airflow_run_id, note)


def reject(
    plan_id: int,
    actor: str,
    url: str | None = None,
    *,
    airflow_run_id: str | None = None,
    note: str | None = None,
) -> Transition:
    """``recommended -> rejected``; anything else is refused with the reason."""
    return _decide(plan_id, "rejected", actor, url, airflow_run_id, note)


def status_of(plan_id: int, url: str | None = None) -> tuple[str, str, int | None]:
    """(status, group id, epoch) of one plan."""
    with db.connect(url) as conn:
        row = plan_transitions.plan_status_row(conn, plan_id)
    if row is None:
        raise UnknownPlan(f"plan {plan_id} does not exist")
    return row


@dataclass(frozen=True)
class _Written:
    """What the Kafka side of a publish wrote: its epoch, the note for the transition, dropped members."""

    epoch: int
    text: str
    dropped: tuple[str, ...] = ()
    record: Any = None  # the broker plan record (broker assignor only)


def publish(
    plan_id: int,
    kafka_config: Mapping[str, Any],
    actor: str,
    url: str | None = None,
    *,
    airflow_run_id: str | None = None,
    note: str | None = None,
    topic: str = assignment_topic.DEFAULT_TOPIC,
    broker_topic: str = BROKER_PLAN_TOPIC,
    timeout: float = 30.0,
) -> Published:
    """Publish an ``approved`` plan its group's way (static assignments on ``topic``, or the plan record
    on ``broker_topic`` and a re-assignment); a ``published`` one is a no-op (a broker-applied one not in
    force is re-assigned again). KafkaUnavailable: the plan stays ``approved``; calling again completes it.
    """
    status, group_id, epoch = status_of(plan_id, url)
    if status == "published":
        log.info("plan %s is already published at epoch %s", plan_id, epoch)
        return _republished(plan_id, group_id, int(epoch or 0), kafka_config, url, broker_topic, timeout)
    if status != "approved":
        raise _refusal(plan_id, status, "published")
    assignments = plan_assignment_map(plan_id, url)
    with db.connect(url) as conn:
        mode = require_applied(conn, plan_id, group_id)  # before anything reaches Kafka
        previous, after_epoch = plan_transitions.publish_inputs(conn, group_id)
        identities = member_identities_of_plan(conn, plan_id) if mode == BROKER else {}
    if mode == BROKER:
        written = _write_broker_plan(kafka_config, group_id, plan_id, assignments, identities,
                                     broker_topic, after_epoch, timeout)  # fmt: skip
    else:
        written = _write_static(
            kafka_config, group_id, plan_id, assignments, previous, topic, after_epoch, timeout
        )
    done = _mark_published(plan_id, group_id, actor, url, airflow_run_id, note, written, tuple(assignments))
    done = replace(done, apply_mode=mode)
    if mode == BROKER:
        return _put_in_force(done, kafka_config, written.record, timeout)
    return done


def _write_static(
    kafka_config: Mapping[str, Any], group_id: str, plan_id: int, assignments: Mapping[str, Any],
    previous: Sequence[str], topic: str, after_epoch: int, timeout: float,
) -> _Written:  # fmt: skip
    from rebalance_advisor.adapters.assignment_publisher import publish_assignments

    result = publish_assignments(
        kafka_config, group_id, str(plan_id), assignments, previous,
        topic=topic, after_epoch=after_epoch, timeout=timeout,
    )  # fmt: skip
    text = f"epoch {result.epoch} on {result.topic}" + (
        f"; empty assignment for {', '.join(result.dropped)}" if result.dropped else ""
    )
    return _Written(result.epoch, text, result.dropped)


def _write_broker_plan(
    kafka_config: Mapping[str, Any], group_id: str, plan_id: int, assignments: Mapping[str, Any],
    identities: Mapping[str, tuple[str, str | None]], topic: str, after_epoch: int, timeout: float,
) -> _Written:  # fmt: skip
    from rebalance_advisor.adapters.broker_plans import publish_broker_plan

    result = publish_broker_plan(
        kafka_config, group_id, str(plan_id), assignments, identities,
        topic=topic, after_epoch=after_epoch, timeout=timeout,
    )  # fmt: skip
    return _Written(
        result.epoch, f"epoch {result.epoch} on {result.topic} (broker assignor)", (), result.record
    )


def _mark_published(
    plan_id: int, group_id: str, actor: str, url: str | None, airflow_run_id: str | None,
    note: str | None, written: _Written, members: tuple[str, ...],
) -> Published:  # fmt: skip
    """The DB side of a publish, in one transaction: the plan ``published`` with its epoch, the
    group's other standing plans (older and newer) ``superseded``."""
    with db.connect(url) as conn:
        status_now, _ = _locked(conn, plan_id)
        if status_now == "published":  # a concurrent publish of the same plan finished first
            return Published(plan_id, group_id, written.epoch, False, members, written.dropped)
        transition(
            conn, plan_id, "published", actor, airflow_run_id=airflow_run_id,
            note=f"{note}; {written.text}" if note else written.text,
            expect=("approved",), values={"epoch": written.epoch},
        )  # fmt: skip
        superseded = []
        for old in plan_transitions.other_standing_plan_ids(conn, group_id, plan_id):
            transition(
                conn, old, "superseded", actor, airflow_run_id=airflow_run_id,
                note=f"plan {plan_id} published at epoch {written.epoch} (this plan was measured against "
                "the assignment in force before it)",
            )  # fmt: skip
            superseded.append(old)
    log.info("plan %s for group %s published: %s", plan_id, group_id, written.text)
    return Published(
        plan_id, group_id, written.epoch, True, tuple(sorted(members)), written.dropped, tuple(superseded)
    )


def _put_in_force(done: Published, kafka_config: Mapping[str, Any], record: Any, timeout: float) -> Published:
    """Have the broker re-assign the group now (docs/operations/broker-applied-plans.md, "How a plan
    is put in force"). A failed trigger leaves the plan ``published`` (it is written: the broker
    applies it at the group's next re-assignment) and raises KafkaUnavailable, so a retry triggers again."""
    from rebalance_advisor.adapters.broker_reassign import ReassignFailed, ensure_in_force

    try:
        seen = ensure_in_force(kafka_config, record, timeout=timeout)
    except ReassignFailed as error:
        raise assignment_topic.KafkaUnavailable(
            f"plan {done.plan_id} is published (epoch {done.epoch}) but the broker did not re-assign group "
            f"{done.group_id}: {error}; it applies at the group's next re-assignment, or publish the plan "
            "again to retry"
        ) from error
    if not seen.in_force:
        log.warning("plan %s for group %s: %s", done.plan_id, done.group_id, seen.describe())
    return replace(done, in_force=seen.in_force, reassignment=seen.describe(), in_force_s=seen.in_force_s)


def _republished(
    plan_id: int, group_id: str, epoch: int, kafka_config: Mapping[str, Any], url: str | None,
    broker_topic: str, timeout: float,
) -> Published:  # fmt: skip
    """A publish of a published plan: a no-op, except that a broker-applied plan the topic still holds
    is re-assigned if it is not in force (its first trigger may have failed)."""
    with db.connect(url) as conn:
        mode = current_apply_mode(conn, group_id)
    done = Published(plan_id, group_id, epoch, False, apply_mode=mode)
    if mode != BROKER:
        return done
    from rebalance_advisor.adapters.broker_plans import read_plans

    record = read_plans(kafka_config, broker_topic, timeout).plans.get(group_id)
    if record is None or record.plan_id != str(plan_id):
        return done  # a newer plan (or none) is on the topic: nothing of this one to put in force
    return _put_in_force(done, kafka_config, record, timeout)


def auto_approve_and_publish(
    plan_ids: Sequence[int] | None = None,
    url: str | None = None,
    airflow_run_id: str | None = None,
    *,
    kafka_conn_id: str | None = None,
    kafka_config: Mapping[str, Any] | None = None,
    topic: str = assignment_topic.DEFAULT_TOPIC,
    broker_topic: str = BROKER_PLAN_TOPIC,
    timeout: float = 30.0,
) -> AutoPublished:
    """The advisor DAG's ``static`` publish mode: approve and publish a run's plans.

    Only plans that reach their consumers are published (manual-assign groups: static assignments;
    KIP-848 groups on the broker plugin's assignor: the broker plan record); other plans stay
    ``recommended`` advice (their consumers follow Kafka's own assignors). Without ``plan_ids`` the run's recommended plans are taken from the
    advisor run of ``airflow_run_id``. Retry-safe: approved plans are not approved again, published
    ones are no-ops. If Kafka is down every plan is tried, then KafkaUnavailable is raised (the
    Airflow task fails and its retry completes the publish).
    """
    todo, advice_only = _publishable(plan_ids, url, airflow_run_id)
    if not todo:
        log.info("no plan that reaches its consumers to publish (advice only: %s)", list(advice_only))
        return AutoPublished(advice_only=advice_only)
    if kafka_config is None:
        from rebalance_advisor.adapters.airflow_connections import DEFAULT_KAFKA_CONN_ID, kafka_client_config

        kafka_config = kafka_client_config(kafka_conn_id or DEFAULT_KAFKA_CONN_ID)
    published, failed, errors = _publish_each(
        todo, kafka_config, url, airflow_run_id, topic=topic, broker_topic=broker_topic, timeout=timeout
    )
    if errors:
        raise assignment_topic.KafkaUnavailable(
            f"{len(errors)} of {len(todo)} plan(s) not published (they stay approved; a retry completes "
            f"them): {errors[0]}"
        )
    return AutoPublished(tuple(published), advice_only, tuple(failed))


#: the note of an approval by :func:`auto_approve_and_publish`
AUTO_NOTE = "auto-approved: publish mode static"


def _publish_each(
    todo: Sequence[tuple[int, str]],
    kafka_config: Mapping[str, Any],
    url: str | None,
    airflow_run_id: str | None,
    **publish_args: Any,
) -> tuple[list[Published], list[int], list[assignment_topic.KafkaUnavailable]]:
    """Approve (when recommended) and publish each plan: (published, the plans Kafka refused, its
    errors). Every plan is tried even when Kafka is down, so a retry has only the refused ones left."""
    errors: list[assignment_topic.KafkaUnavailable] = []
    published: list[Published] = []
    failed: list[int] = []
    for plan_id, status in todo:
        if status == "recommended":
            approve(plan_id, AUTO_ACTOR, url, airflow_run_id=airflow_run_id, note=AUTO_NOTE)
        try:
            published.append(
                publish(plan_id, kafka_config, AUTO_ACTOR, url, airflow_run_id=airflow_run_id, **publish_args)
            )
        except assignment_topic.KafkaUnavailable as error:
            log.error("plan %s not published (or not put in force): %s", plan_id, error)
            failed.append(plan_id)
            errors.append(error)
    return published, failed, errors


def _publishable(
    plan_ids: Sequence[int] | None, url: str | None, airflow_run_id: str | None
) -> tuple[list[tuple[int, str]], tuple[int, ...]]:
    """(the standing plans that reach their consumers, with their status; the plans that are advice
    only), of ``plan_ids`` or else of the advisor run of ``airflow_run_id``."""
    with db.connect(url) as conn:
        if plan_ids is None:
            plan_ids = plan_transitions.standing_plan_ids_of_airflow_run(conn, airflow_run_id)
        plans = plan_transitions.plan_groups_and_statuses(conn, plan_ids)
        applied = {g for _, g, _ in plans if is_applied(current_apply_mode(conn, g))}
    todo = [(i, s) for i, g, s in plans if g in applied and s in STANDING_STATUSES]
    return todo, tuple(i for i, g, _ in plans if g not in applied)


def withdraw(
    plan_id: int,
    kafka_config: Mapping[str, Any],
    actor: str,
    url: str | None = None,
    *,
    note: str | None = None,
    broker_topic: str = BROKER_PLAN_TOPIC,
    timeout: float = 30.0,
) -> Transition:
    """Take a published broker-applied plan out of force: the group's plan record becomes a
    tombstone (the group gets ``uniform``'s assignment at its next re-assignment) and the plan
    ``published -> superseded``, noted as withdrawn. Static assignments are not withdrawn this way:
    their consumers keep the last assignment they read (publish another plan instead).
    docs/operations/broker-applied-plans.md, "Withdrawing a plan"."""
    from rebalance_advisor.adapters.broker_plans import withdraw_broker_plan
    from rebalance_advisor.store.plans import get_plan

    plan = get_plan(plan_id, url)
    if plan is None:
        raise UnknownPlan(f"plan {plan_id} does not exist")
    status, group_id, mode = plan.status, plan.group_id, plan.apply_mode
    if status != "published" or mode != BROKER:
        raise IllegalTransition(
            f"plan {plan_id} is {status!r} ({mode}): only a published plan applied by the broker "
            "assignor can be withdrawn (static assignments: publish another plan)"
        )
    withdraw_broker_plan(kafka_config, group_id, broker_topic, timeout)
    text = f"withdrawn: the group is back on uniform{f'; {note}' if note else ''}"
    with db.connect(url) as conn:
        done = transition(conn, plan_id, "superseded", actor, note=text, expect=("published",))
    log.info("plan %s of group %s withdrawn by %s", plan_id, group_id, actor)
    return done
