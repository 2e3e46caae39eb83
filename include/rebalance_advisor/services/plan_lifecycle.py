"""Plan lifecycle: who may move a plan where, recorded, race-free; and publishing approved plans.

    recommended -> approved -> published -> superseded
    recommended -> rejected          (skipped, rejected and superseded are final)

Every status change writes a ``plan_transitions`` row (actor, Airflow run, time, note) in the
same transaction, under a row lock (``SELECT ... FOR UPDATE`` on PostgreSQL) and a conditional
``UPDATE ... WHERE status = <the status read>``, so of two concurrent approvers exactly one wins.

Only plans of manual-assign groups (registered static members) may become ``approved`` or
``published`` (:func:`require_manual_assign`, checked in :func:`transition` and before
:func:`publish` writes to Kafka): a dynamic (``subscribe()``) group's plan is advice only, whichever
entry point asks (the approval DAG, ``plan-status``, the web API).

Publishing (:func:`publish`) writes to Kafka first (``publisher.publish_assignments``, one Kafka
transaction) and only then, in one DB transaction, stores the epoch, marks the plan ``published``
and the group's older standing plans ``superseded``. If the broker is down nothing changes (the
plan stays ``approved``); if the process dies between Kafka and the DB, a retry finds the plan on
the topic already (the publisher's no-op) and completes the DB side.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.engine import Connection

from rebalance_advisor.adapters import assignment_topic
from rebalance_advisor.domain.decisions import STANDING_STATUSES
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.store import db, plan_transitions, static_members_table
from rebalance_advisor.store.plan_models import PLAN_STATUSES
from rebalance_advisor.store.plan_records import PlanTransitionRecord
from rebalance_advisor.store.plans import plan_assignment_map

log = logging.getLogger(__name__)

#: status -> the statuses it may move to. ``recommended -> superseded`` is the planner's (a newer
#: recommendation for the group); ``approved -> superseded`` happens when a newer plan is published.
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
    """The plan is of a dynamic (``subscribe()``) group: advice only, never approved or published."""


#: the statuses that lead to static assignments on the topic: only manual-assign groups reach them
PUBLISHING_STATUSES = ("approved", "published")


def is_manual_assign(conn: Connection, group_id: str) -> bool:
    """Whether ``group_id`` has registered static members: only its plans may be approved or
    published (:func:`require_manual_assign`); the pages offer Approve on the same test."""
    return bool(static_members_table.member_ids(conn, group_id))


def require_manual_assign(conn: Connection, plan_id: int, group_id: str) -> None:
    """Refuse to approve or publish a plan of a group that has no registered static members.

    Why: the consumers of a dynamic group take their partitions from Kafka's group assignor and
    never read the assignment topic, so static assignments for them would be a second, conflicting
    truth. Such plans are advice only until the group is registered as manual-assign.
    """
    if is_manual_assign(conn, group_id):
        return
    raise AdviceOnly(
        f"plan {plan_id} is for group {group_id!r}, a dynamic (subscribe()) group: its consumers take "
        "their partitions from Kafka's group assignor, so the plan is advice only and is not approved "
        "or published as static assignments; to publish it, register the group's consumers as "
        "manual-assign first (`rebalance-advisor members add` or the kafka_static_members DAG)"
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
        require_manual_assign(conn, plan_id, group_id)
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


def publish(
    plan_id: int,
    kafka_config: Mapping[str, Any],
    actor: str,
    url: str | None = None,
    *,
    airflow_run_id: str | None = None,
    note: str | None = None,
    topic: str = assignment_topic.DEFAULT_TOPIC,
    timeout: float = 30.0,
) -> Published:
    """Publish an ``approved`` plan as static assignments; a ``published`` one is a no-op.

    Raises :class:`~rebalance_advisor.adapters.assignment_topic.KafkaUnavailable` when the broker
    cannot be reached: the plan stays ``approved`` and calling again completes it.
    """
    from rebalance_advisor.adapters.assignment_publisher import publish_assignments

    status, group_id, epoch = status_of(plan_id, url)
    if status == "published":
        log.info("plan %s is already published at epoch %s: nothing to do", plan_id, epoch)
        return Published(plan_id, group_id, int(epoch or 0), False)
    if status != "approved":
        raise _refusal(plan_id, status, "published")
    assignments = plan_assignment_map(plan_id, url)
    with db.connect(url) as conn:
        require_manual_assign(conn, plan_id, group_id)  # before anything reaches Kafka
        previous, after_epoch = plan_transitions.publish_inputs(conn, group_id)
    result = publish_assignments(
        kafka_config,
        group_id,
        str(plan_id),
        assignments,
        previous,
        topic=topic,
        after_epoch=after_epoch,
        timeout=timeout,
    )
    text = f"epoch {result.epoch} on {result.topic}" + (
        f"; empty assignment for {', '.join(result.dropped)}" if result.dropped else ""
    )
    with db.connect(url) as conn:
        status_now, _ = _locked(conn, plan_id)
        if status_now == "published":  # a concurrent publish of the same plan finished first
            return Published(plan_id, group_id, result.epoch, False, tuple(assignments), result.dropped)
        transition(
            conn,
            plan_id,
            "published",
            actor,
            airflow_run_id=airflow_run_id,
            note=f"{note}; {text}" if note else text,
            expect=("approved",),
            values={"epoch": result.epoch},
        )
        superseded = []
        for old in plan_transitions.older_standing_plan_ids(conn, group_id, plan_id):
            transition(
                conn,
                old,
                "superseded",
                actor,
                airflow_run_id=airflow_run_id,
                note=f"plan {plan_id} published at epoch {result.epoch}",
            )
            superseded.append(old)
    log.info("plan %s for group %s published: %s", plan_id, group_id, text)
    return Published(
        plan_id, group_id, result.epoch, True, tuple(sorted(assignments)), result.dropped, tuple(superseded)
    )


def auto_approve_and_publish(
    plan_ids: Sequence[int] | None = None,
    url: str | None = None,
    airflow_run_id: str | None = None,
    *,
    kafka_conn_id: str | None = None,
    kafka_config: Mapping[str, Any] | None = None,
    topic: str = assignment_topic.DEFAULT_TOPIC,
    timeout: float = 30.0,
) -> AutoPublished:
    """The advisor DAG's ``static`` publish mode: approve and publish a run's plans.

    Only plans of manual-assign groups (with registered static members) are published; plans of
    dynamic groups stay ``recommended`` advice (their consumers use Kafka's assignors and never
    read the assignment topic). Without ``plan_ids`` the run's recommended plans are taken from the
    advisor run of ``airflow_run_id``. Retry-safe: approved plans are not approved again, published
    ones are no-ops. If Kafka is down every plan is tried, then KafkaUnavailable is raised (the
    Airflow task fails and its retry completes the publish).
    """
    with db.connect(url) as conn:
        if plan_ids is None:
            plan_ids = plan_transitions.standing_plan_ids_of_airflow_run(conn, airflow_run_id)
        plans = plan_transitions.plan_groups_and_statuses(conn, plan_ids)
        static_groups = static_members_table.static_group_ids(conn)
    todo = [(i, g, s) for i, g, s in plans if g in static_groups and s in STANDING_STATUSES]
    advice_only = tuple(i for i, g, _ in plans if g not in static_groups)
    if not todo:
        log.info("no plan of a manual-assign group to publish (advice only: %s)", list(advice_only))
        return AutoPublished(advice_only=advice_only)
    if kafka_config is None:
        from rebalance_advisor.adapters.airflow_connections import DEFAULT_KAFKA_CONN_ID, kafka_client_config

        kafka_config = kafka_client_config(kafka_conn_id or DEFAULT_KAFKA_CONN_ID)
    note = "auto-approved: publish mode static"
    errors: list[assignment_topic.KafkaUnavailable] = []
    published: list[Published] = []
    failed: list[int] = []
    for plan_id, _group, status in todo:
        if status == "recommended":
            approve(plan_id, AUTO_ACTOR, url, airflow_run_id=airflow_run_id, note=note)
        try:
            done = publish(
                plan_id,
                kafka_config,
                AUTO_ACTOR,
                url,
                airflow_run_id=airflow_run_id,
                topic=topic,
                timeout=timeout,
            )
        except assignment_topic.KafkaUnavailable as error:
            log.error("plan %s stays approved: %s", plan_id, error)
            failed.append(plan_id)
            errors.append(error)
            continue
        published.append(done)
    if errors:
        raise assignment_topic.KafkaUnavailable(
            f"{len(errors)} of {len(todo)} plan(s) not published (they stay approved; a retry completes "
            f"them): {errors[0]}"
        )
    return AutoPublished(tuple(published), advice_only, tuple(failed))
