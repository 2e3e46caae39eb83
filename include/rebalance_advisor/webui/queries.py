"""Read side of the UI: the few questions the pages and the JSON API ask of the plan database.

Typed out: the API's response models (:mod:`.schemas`), which the pages read too; one short
transaction per question.
The SQL is in the store: snapshots through :mod:`rebalance_advisor.store.snapshots`, plan rows
through :mod:`rebalance_advisor.store.plan_queries`. Lag "now" follows the lag rule (docs/architecture.md, "Lag") (see :func:`partition_lag`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection

from rebalance_advisor.domain.decisions import FLAGGED_OUTCOMES, Thresholds
from rebalance_advisor.domain.estimates import member_key
from rebalance_advisor.domain.lag import ResetPolicy, partition_lags
from rebalance_advisor.domain.snapshot_model import Snapshot
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.services import plan_report
from rebalance_advisor.services.plan_lifecycle import is_manual_assign
from rebalance_advisor.store import db, plan_queries
from rebalance_advisor.store.group_protocols import current_apply_mode
from rebalance_advisor.store.plan_records import PlanAssignmentRecord, PlanRecord
from rebalance_advisor.store.plans import get_plan
from rebalance_advisor.store.snapshots import (
    latest_snapshot_row,
    load_snapshot,
    newest_snapshot_id_of_group,
    snapshot_group_rows,
)
from rebalance_advisor.webui.schemas import (
    GroupDetail,
    GroupList,
    GroupRow,
    ImbalancePoint,
    InForcePlan,
    MemberComparison,
    MemberNow,
    Move,
    NowView,
    OutcomeRow,
    OwnerNow,
    PartitionNow,
    PlanAssignmentRow,
    PlanDetail,
    PlanPage,
    PlanSummary,
    SnapshotRef,
    TransitionItem,
)


class NotFound(AdvisorError):
    """An unknown group, plan or snapshot: the API answers 404 with this message."""


def imbalance_threshold(conn: Connection, run_id: int | None = None) -> float:
    """The imbalance threshold of advisor run ``run_id`` (default: the newest run, what flagged the
    groups), else the default."""
    params = plan_queries.run_params(conn, run_id)
    try:
        return float((params or {}).get("imbalance_threshold") or Thresholds().imbalance_threshold)
    except (TypeError, ValueError):
        return Thresholds().imbalance_threshold


def group_overview(url: str) -> GroupList:
    """Every group of the newest snapshot with its newest advisor outcome and plan."""
    with db.connect(url) as conn:
        snapshot = latest_snapshot_row(conn)
        threshold = imbalance_threshold(conn)
        if snapshot is None:
            return GroupList(snapshot=None, threshold=threshold, groups=[])
        groups = snapshot_group_rows(conn, snapshot.id)
        outcomes = plan_queries.latest_outcomes(conn, [g.group_id for g in groups])
        plans = plan_queries.latest_plan_per_group(conn)
    rows = []
    for g in groups:
        outcome = outcomes.get(g.group_id)
        plan = plans.get(g.group_id)
        rows.append(
            GroupRow(
                group_id=g.group_id,
                state=g.state,
                type=g.group_type,
                assignor=g.assignor,
                members=g.member_count,
                total_lag=outcome.total_lag if outcome else None,
                max_member_lag=outcome.max_lag_before if outcome else None,
                imbalance=outcome.imbalance_before if outcome else None,
                flagged=outcome is not None and outcome.outcome in FLAGGED_OUTCOMES,
                outcome=outcome.outcome if outcome else None,
                reason=outcome.reason if outcome else None,
                outcome_snapshot_id=outcome.snapshot_id if outcome else None,
                best_strategy=outcome.best_strategy if outcome else None,
                latest_plan_id=plan.id if plan else None,
                latest_plan_status=plan.status if plan else None,
            )
        )
    head = SnapshotRef(id=snapshot.id, taken_at=snapshot.taken_at, status=snapshot.status)
    return GroupList(snapshot=head, threshold=threshold, groups=rows)


def reset_policy(conn: Connection) -> ResetPolicy:
    """The reset policy of the newest advisor run, so lag "now" is counted as the advisor counts it."""
    params = plan_queries.run_params(conn)
    try:
        return ResetPolicy.parse((params or {}).get("reset"))
    except AdvisorError:
        return ResetPolicy()


def current_assignment(snapshot: Snapshot, group_id: str, policy: ResetPolicy) -> NowView:
    """Per-partition lag and owner (named as plans name members), per-member totals, in one snapshot."""
    group = snapshot.group(group_id)
    key_of = {
        m.member_id: member_key(m.member_id, m.group_instance_id) for m in (group.members if group else ())
    }
    partitions = [
        PartitionNow(
            topic=x.topic,
            partition=x.partition,
            log_start_offset=x.log_start,
            log_end_offset=x.log_end,
            committed_offset=x.committed,
            lag=x.lag,
            owner=key_of.get(x.member_id, x.member_id) if x.member_id else None,
        )
        for x in partition_lags(snapshot, policy)
        if x.group_id == group_id
    ]
    members = []
    for m in group.members if group else ():
        label = key_of[m.member_id]
        mine = [p for p in partitions if p.owner == label]
        members.append(
            MemberNow(
                member_id=m.member_id,
                label=label,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                host=m.host,
                lag=sum(p.lag for p in mine),
                partitions=len(mine),
            )
        )
    return NowView(members=members, partitions=partitions)


def group_detail(url: str, group_id: str, history: int = 20, plans: int = 5) -> GroupDetail:
    """One group: what is in force (its published plan, the owners now), its outcome, the standing
    recommendation when it differs from what is in force, latest plans, imbalance history."""
    with db.connect(url) as conn:
        snapshot_id = newest_snapshot_id_of_group(conn, group_id)
        plan_rows = plan_queries.newest_plan_rows_of_group(conn, group_id, plans)
        if snapshot_id is None and not plan_rows:
            raise NotFound(f"consumer group {group_id!r} is in no stored snapshot and has no plans")
        threshold = imbalance_threshold(conn)
        outcome = plan_queries.latest_outcomes(conn, [group_id]).get(group_id)
        policy = reset_policy(conn)
        trend = plan_queries.imbalance_by_run(conn, group_id)
        manual_assign = is_manual_assign(conn, group_id)
        mode = current_apply_mode(conn, group_id)
        force = in_force(conn, group_id, plan_rows)
    per_snapshot: dict[int, float | None] = {}
    for snap, imbalance, _run in trend:  # newest run of each snapshot wins
        per_snapshot.setdefault(snap, imbalance)
    points = sorted(per_snapshot.items())[-history:]
    now = NowView(members=[], partitions=[])
    seen: dict[str, Any] = {}
    if snapshot_id is not None:
        snapshot = load_snapshot(snapshot_id, url, groups=[group_id])
        now = current_assignment(snapshot, group_id, policy)
        g = snapshot.group(group_id)
        seen = {"state": g.state, "type": g.group_type, "assignor": g.assignor, "members": g.member_count}
    now = with_planned_owners(now, force)
    return GroupDetail(
        group_id=group_id,
        snapshot_id=snapshot_id,
        **seen,
        threshold=threshold,
        manual_assign=manual_assign,
        apply_mode=mode,
        outcome=OutcomeRow.model_validate(outcome, from_attributes=True) if outcome else None,
        now=now,
        owners_now=owners_now(now),
        in_force=force.plan,
        standing_plan_id=force.standing_plan_id,
        duplicate_plan_ids=list(force.duplicates),
        plans=[plan_summary(p) for p in plan_rows],
        imbalance_history=[ImbalancePoint(snapshot_id=s, imbalance=v) for s, v in points],
    )


@dataclass(frozen=True)
class InForce:
    """What is in force for a group and how its standing plans compare with it."""

    plan: InForcePlan | None
    owners: dict[tuple[str, int], str]  # the in-force plan's owners (empty without one)
    standing_plan_id: int | None  # the newest standing plan that differs from what is in force
    duplicates: tuple[int, ...]  # standing plans with the in-force plan's very assignment


def in_force(conn: Connection, group_id: str, plan_rows: Sequence[PlanRecord]) -> InForce:
    """The group's published plan and its standing plans (``plan_rows``: the newest few) against it."""
    published = plan_queries.in_force_plan(conn, group_id)
    standing = [p.id for p in plan_rows if p.status in ("recommended", "approved")]
    if published is None:
        return InForce(None, {}, standing[0] if standing else None, ())
    keys = plan_queries.assignment_keys(conn, [published.id, *standing])
    duplicates = tuple(i for i in standing if keys.get(i) == keys.get(published.id))
    plan = InForcePlan(
        plan_id=published.id, epoch=published.epoch, apply_mode=published.apply_mode,
        strategy=published.strategy, published_at=plan_queries.published_at(conn, published.id),
        moves=published.moves,
    )  # fmt: skip
    differing = [i for i in standing if i not in duplicates]
    return InForce(
        plan, plan_queries.owners_of_plan(conn, published.id), differing[0] if differing else None, duplicates
    )


def with_planned_owners(now: NowView, force: InForce) -> NowView:
    """``now`` with owners from the plan in force where the snapshot lists no members: manual-assign
    (``assign()``) consumers are not group members, so Kafka cannot say who holds what."""
    if now.members or not force.owners or force.plan is None:
        return now
    partitions = [
        p.model_copy(update={"owner": force.owners.get((p.topic, p.partition))}) for p in now.partitions
    ]
    source = f"plan #{force.plan.plan_id} in force (epoch {force.plan.epoch})"
    return now.model_copy(update={"partitions": partitions, "owners_from": source})


def owners_now(now: NowView) -> list[OwnerNow]:
    """Per owner (unowned partitions last, as "(unowned)"), its partition count and lag."""
    found: dict[str, list[int]] = {}
    for p in now.partitions:
        found.setdefault(p.owner or "", []).append(p.lag)
    ordered = sorted(found, key=lambda m: (m == "", m))
    return [OwnerNow(member=m or "(unowned)", partitions=len(found[m]), lag=sum(found[m])) for m in ordered]


def plan_summary(plan: PlanRecord) -> PlanSummary:
    """A plan row without its bulky per-member metrics (those are in :func:`plan_detail`)."""
    return PlanSummary.model_validate(plan, from_attributes=True)


def plan_list_page(url: str, *, group: str | None, status: str | None, strategy: str | None,
               page: int, page_size: int) -> PlanPage:  # fmt: skip
    """Plans newest first, filtered, one page; ``total`` counts every match."""
    with db.connect(url) as conn:
        total, rows = plan_queries.plan_page(
            conn, group=group, status=status, strategy=strategy, page=page, page_size=page_size
        )
    return PlanPage(total=total, page=page, page_size=page_size, items=[plan_summary(r) for r in rows])


def plan_row(conn: Connection, plan_id: int) -> PlanRecord:
    found = plan_queries.plan_table_row(conn, plan_id)
    if found is None:
        raise NotFound(f"plan {plan_id} does not exist")
    return found


@dataclass(frozen=True)
class PlanPicture:
    """What the group page pictures of a plan: the API's :class:`PlanDetail`, plus (not in the API)
    the imbalance threshold of the run that made it (its reason cites it), the plan's stored load
    model (``metrics`` JSON) and the group's time lag in the plan's snapshot."""

    detail: PlanDetail
    run_threshold: float
    metrics: dict[str, Any] | None
    max_time_lag_s: float | None


def plan_detail(url: str, plan_id: int) -> PlanPicture:
    """A plan, its assignment and transitions, per-member lag before/after, and the moves against the
    baseline its ``moves`` count uses: the owners in the snapshot it was planned from, or for a
    manual-assign group the published plan it was measured against (:func:`baseline_owners`)."""
    plan = get_plan(plan_id, url)
    if plan is None:
        raise NotFound(f"plan {plan_id} does not exist")
    with db.connect(url) as conn:
        policy = reset_policy(conn)
        run_threshold = imbalance_threshold(conn, plan.run_id)  # the threshold its reason cites
    max_time_lag_s = None
    try:
        snapshot = load_snapshot(plan.snapshot_id, url, groups=[plan.group_id])
        before = current_assignment(snapshot, plan.group_id, policy)
        # the group's time lag as stored with its snapshot (docs/architecture.md, "Lag"): the furthest-behind partition
        max_time_lag_s = max(
            (t.seconds for (g, _, _), t in (snapshot.rates.time_lag.items() if snapshot.rates else ())
             if g == plan.group_id and t.seconds is not None),
            default=None,
        )  # fmt: skip
    except AdvisorError:  # the snapshot was pruned: the plan still stands, without a diff
        before = NowView(members=[], partitions=[])
    owner_before = baseline_owners(plan, before, plan_report.baseline_published(url, plan))
    assignments = [
        PlanAssignmentRow(
            **dataclasses.asdict(a), member_label=a.member_id
        )  # plans name static members by instance id
        for a in sorted(plan.assignments, key=lambda a: (a.topic, a.partition, a.key_hash_start or 0))
    ]
    moves = [  # plans name members as the page labels them: the label is the member id
        Move(topic=m.topic, partition=m.partition, lag=m.lag, from_member=m.from_member,
             from_label=m.from_member, to_member=m.to_member, to_label=m.to_member)
        for m in plan_report.plan_moves(plan.assignments, owner_before)
    ]  # fmt: skip
    detail = PlanDetail(
        plan=plan_summary(plan),
        members=member_comparison(plan, before.members, plan.assignments),
        assignments=assignments,
        moves=moves,
        transitions=[TransitionItem.model_validate(t, from_attributes=True) for t in plan.transitions],
    )
    return PlanPicture(detail, run_threshold, plan.metrics, max_time_lag_s)


def baseline_owners(
    plan: PlanRecord, now: NowView, published: Mapping[str, Sequence[tuple]] | None
) -> dict[tuple[str, int], str | None]:
    """Who held each partition in the baseline the planner measured ``plan`` against: the rule of
    :func:`rebalance_advisor.services.plan_report.baseline_owners`, on the page's view of the snapshot."""
    owners = {(p.topic, p.partition): p.owner for p in now.partitions}
    return plan_report.baseline_owners(owners, bool(now.members), published)


def member_comparison(
    plan: PlanRecord, now: Sequence[MemberNow], assignments: Sequence[PlanAssignmentRecord]
) -> list[MemberComparison]:
    """Per member (plan naming): lag and partition count in the plan's snapshot and under the plan.

    The planner's own per-member numbers (``metrics.before/after``: ``member_lag``,
    ``member_partitions``) win where present: for a manual-assign group they are its published
    plan's, which the snapshot cannot show. The snapshot and the plan's assignment rows fill in the rest.
    """
    metrics = plan.metrics or {}
    measured = metrics.get("before") or {}
    before = measured.get("member_lag") or {}
    after = (metrics.get("after") or {}).get("member_lag") or {}
    lag_now = {m.label: m.lag for m in now} | {k: int(v) for k, v in before.items()}
    count_now = {m.label: m.partitions for m in now} | {
        k: int(v) for k, v in (measured.get("member_partitions") or {}).items()
    }
    lag_plan: dict[str, int] = {}
    count_plan: dict[str, int] = {}
    for a in assignments:
        lag_plan[a.member_id] = lag_plan.get(a.member_id, 0) + int(a.lag)
        count_plan[a.member_id] = count_plan.get(a.member_id, 0) + 1
    lag_plan |= {k: int(v) for k, v in after.items()}
    return [
        MemberComparison(
            member_id=m,
            label=m,
            lag_before=lag_now.get(m, 0),
            lag_after=lag_plan.get(m, 0),
            partitions_before=count_now.get(m, 0),
            partitions_after=count_plan.get(m, 0),
        )
        for m in sorted(set(lag_now) | set(lag_plan))
    ]
