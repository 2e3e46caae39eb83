"""What a plan changes, in words a person decides on: its moves against the assignment it was
measured against, and its predicted effect. The web page (``webui/queries.plan_detail``) and the
approval DAG's human-in-the-loop prompt (``dag_tasks/publishing_tasks.approval_prompt``) both read it.

The baseline rule (one place): a group whose snapshot lists members is measured against the owners
in the plan's snapshot; a manual-assign group (``assign()`` consumers Kafka does not list) against
the published plan in force when the plan was made (for a published plan, the one it replaced:
``store/plan_queries.predecessor_in_force``); with neither, every partition was unowned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rebalance_advisor.domain.estimates import member_key
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.services.outcome_report import catch_up_text
from rebalance_advisor.store import db, plan_queries
from rebalance_advisor.store.plan_records import PlanAssignmentRecord, StoredPlan
from rebalance_advisor.store.plans import get_plan, plan_assignment_map
from rebalance_advisor.store.snapshots import load_snapshot

Owners = Mapping[tuple[str, int], str | None]

#: moves listed in the approval prompt; the rest are counted
PROMPT_MOVES = 20


@dataclass(frozen=True)
class PlanMove:
    """One partition whose owner changes under a plan (``from_member`` None: it was unowned)."""

    topic: str
    partition: int
    lag: int
    from_member: str | None
    to_member: str


def baseline_owners(
    snapshot_owners: Owners, has_members: bool, published: Mapping[str, Sequence[tuple]] | None
) -> dict[tuple[str, int], str | None]:
    """Who held each partition in the baseline a plan was measured against (module docstring).
    ``published``: {member: [(topic, partition, ...)]} of the plan in force then, or None."""
    owners = dict(snapshot_owners)
    if has_members or not published:
        return owners
    return owners | {(held[0], held[1]): member for member, rows in published.items() for held in rows}


def plan_moves(assignments: Sequence[PlanAssignmentRecord], baseline: Owners) -> list[PlanMove]:
    """The plan's rows whose partition the baseline gives another owner, by topic and partition."""
    ordered = sorted(assignments, key=lambda a: (a.topic, a.partition, a.key_hash_start or 0))
    return [
        PlanMove(a.topic, a.partition, a.lag, baseline.get((a.topic, a.partition)), a.member_id)
        for a in ordered
        if baseline.get((a.topic, a.partition)) != a.member_id
    ]


def baseline_published(url: str | None, plan: StoredPlan) -> dict[str, list[tuple]] | None:
    """{member: holdings} of the published plan ``plan`` was measured against, or None."""
    with db.connect(url) as conn:
        found = plan_queries.predecessor_in_force(conn, plan.group_id, plan.id, plan.epoch)
    return plan_assignment_map(found, url) if found is not None else None


def snapshot_owners(url: str | None, plan: StoredPlan) -> tuple[dict[tuple[str, int], str | None], bool]:
    """(owners by member key, whether the group had members) in the plan's snapshot; a pruned
    snapshot counts as no members."""
    try:
        group = load_snapshot(plan.snapshot_id, url, groups=[plan.group_id]).group(plan.group_id)
    except AdvisorError:
        return {}, False
    members = group.members if group else ()
    owners = {tp: member_key(m.member_id, m.group_instance_id) for m in members for tp in m.assignment}
    return owners, bool(members)


def moves_of(plan_id: int, url: str | None = None) -> tuple[StoredPlan, list[PlanMove]]:
    """The stored plan and its moves against its baseline (module docstring)."""
    plan = get_plan(plan_id, url)
    if plan is None:
        raise AdvisorError(f"plan {plan_id} does not exist")
    owners, has_members = snapshot_owners(url, plan)
    return plan, plan_moves(
        plan.assignments, baseline_owners(owners, has_members, baseline_published(url, plan))
    )


@dataclass(frozen=True)
class ApprovalPrompt:
    """The subject and Markdown body of the human-in-the-loop approval."""

    subject: str
    body: str


def predicted_effect(plan: StoredPlan) -> str:
    """The plan's numbers before → after, in one line of words."""
    text = f"max member lag {plan.max_lag_before:,} → {plan.max_lag_after:,}"
    if plan.unowned_lag_before or plan.unowned_lag_after:
        text += f"; lag no member owns {plan.unowned_lag_before or 0:,} → {plan.unowned_lag_after or 0:,}"
    if plan.overloaded_members_before is not None and plan.overloaded_members_after is not None:
        text += f"; overloaded members {plan.overloaded_members_before} → {plan.overloaded_members_after}"
        before = catch_up_text(plan.predicted_catch_up_before_s, bool(plan.overloaded_members_before))
        after = catch_up_text(plan.predicted_catch_up_after_s, bool(plan.overloaded_members_after))
        if (before, after) != ("-", "-"):
            text += f"; predicted catch-up {before} → {after}"
    return text


def approval_prompt(plan: StoredPlan, moves: Sequence[PlanMove]) -> ApprovalPrompt:
    """What the approver reads: the group, the plan, each move (the first :data:`PROMPT_MOVES`) and
    the predicted effect, and what each answer does."""
    subject = f"Approve plan {plan.id} for consumer group {plan.group_id}: {len(moves)} partition move(s)?"
    shown = [
        f"- `{m.topic}-{m.partition}` (lag {m.lag:,}): {m.from_member or '(unowned)'} → {m.to_member}"
        for m in moves[:PROMPT_MOVES]
    ]
    if len(moves) > PROMPT_MOVES:
        shown.append(f"- … and {len(moves) - PROMPT_MOVES} more")
    body = "\n".join(
        [
            f"**Group `{plan.group_id}`**, plan {plan.id} ({plan.strategy}, status {plan.status}), "
            f"applied as **{plan.apply_mode}**.",
            "",
            f"**Predicted effect:** {predicted_effect(plan)}.",
            "",
            f"**Moves ({len(moves)}):**" if moves else "**Moves:** none",
            *shown,
            "",
            "Approve publishes it (the next epoch); Reject holds the group back until its members, "
            "subscriptions, partitions or assignment in force change.",
        ]
    )
    return ApprovalPrompt(subject, body)
