"""When a new recommendation is the standing plan again, and when a rejection still holds.

Two rules (docs/operations/plan-lifecycle.md states them for operators):

- **Identity.** A plan *is* its assignment: which member gets which partition (and key-hash range).
  An advisor run that arrives at the same assignment for a group as the group's standing
  ``recommended`` or ``approved`` plan keeps that plan (id, status, approval) and only refreshes
  its numbers and ``last_confirmed_at``; a new plan id only when the assignment differs.
- **Rejections stick.** While a group's newest rejected plan stands, a new recommendation for the
  group is held back (outcome ``held_by_rejection``) until the situation changed since the
  rejected plan was last computed: a member joined or left, a member's subscriptions changed, the
  assignment in force changed (a publish, a rebalance), the group's topics gained or lost
  partitions, or the new plan relieves the busiest member by more than
  ``1 + REJECTION_BENEFIT_MARGIN`` times what the rejected plan would have.

Pure: no I/O. The store applies both rules under the plan-write lock (``store/plans.write_run``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rebalance_advisor.domain.advice import GroupAdvice

#: a rejection no longer holds when the new plan's benefit (lag taken off the busiest member)
#: exceeds the rejected plan's by more than this fraction (0.5: half as much again)
REJECTION_BENEFIT_MARGIN = 0.5

#: the outcome of a group whose recommendation a standing rejection holds back
HELD_BY_REJECTION = "held_by_rejection"

#: one row of an assignment: member, topic, partition, key-hash start and end (None: whole partition)
AssignmentRow = tuple[str, str, int, int | None, int | None]


def assignment_key(rows: Iterable[AssignmentRow]) -> frozenset[AssignmentRow]:
    """What makes two plans the same plan: the set of (member, topic, partition, range) rows."""
    return frozenset((str(m), str(t), int(p), lo, hi) for m, t, p, lo, hi in rows)


def advice_assignment_key(advice: GroupAdvice) -> frozenset[AssignmentRow] | None:
    """The assignment key of the advice's chosen plan, None without one."""
    plan = advice.plan
    if plan is None:
        return None
    whole = ((m, t, p, None, None) for m, t, p, _lag in plan.assignments)
    ranges = ((m, t, p, lo, hi) for m, t, p, _lag, lo, hi in plan.key_ranges)
    return assignment_key([*whole, *ranges])


@dataclass(frozen=True)
class GroupSituation:
    """What a plan was computed against, apart from lags and rates: each member's subscribed topics
    and the partitions it owns, and the partition count of each topic of the group."""

    members: tuple[tuple[str, tuple[str, ...], tuple[tuple[str, int], ...]], ...]
    partitions: tuple[tuple[str, int], ...]

    @classmethod
    def of_document(cls, doc: Mapping[str, Any]) -> GroupSituation:
        """From a group's planner document (``domain/spec_documents``)."""
        members = tuple(
            sorted(
                (
                    str(m["member_id"]),
                    tuple(sorted(m.get("topics") or ())),
                    tuple(sorted((str(t), int(p)) for t, p in m.get("owned") or ())),
                )  # fmt: skip
                for m in doc.get("members") or ()
            )
        )
        counts: dict[str, int] = {}
        for part in doc.get("partitions") or ():
            counts[part["topic"]] = counts.get(part["topic"], 0) + 1
        return cls(members, tuple(sorted(counts.items())))

    def to_record(self) -> dict[str, Any]:
        """The JSON form stored on the plan row (``plans.situation``)."""
        return {
            "members": [[m, list(topics), [list(o) for o in owned]] for m, topics, owned in self.members],
            "partitions": [list(p) for p in self.partitions],
        }

    @classmethod
    def from_record(cls, data: Mapping[str, Any] | None) -> GroupSituation | None:
        if not data:
            return None
        members = tuple((str(m), tuple(topics), tuple((t, int(p)) for t, p in owned))
                        for m, topics, owned in data.get("members", ()))  # fmt: skip
        return cls(members, tuple((t, int(n)) for t, n in data.get("partitions", ())))

    def change_from(self, earlier: GroupSituation) -> str | None:
        """How this situation differs from ``earlier`` in words, None when it does not."""
        before = {m: (topics, owned) for m, topics, owned in earlier.members}
        now = {m: (topics, owned) for m, topics, owned in self.members}
        joined, left = sorted(set(now) - set(before)), sorted(set(before) - set(now))
        if joined or left:
            return (
                "members changed"
                + (f"; joined: {', '.join(joined)}" if joined else "")
                + (f"; left: {', '.join(left)}" if left else "")
            )
        resubscribed = sorted(m for m in now if now[m][0] != before[m][0])
        if resubscribed:
            return f"subscriptions changed for {', '.join(resubscribed)}"
        if self.partitions != earlier.partitions:
            return "the group's topics changed their partitions"
        if any(now[m][1] != before[m][1] for m in now):
            return "the assignment in force changed"
        return None


@dataclass(frozen=True)
class RejectedPlan:
    """A group's newest rejected plan, as the rejection rule needs it."""

    plan_id: int
    max_lag_before: int
    max_lag_after: int
    situation: GroupSituation | None
    note: str | None = None

    @property
    def benefit(self) -> int:
        """Lag the rejected plan would have taken off the busiest member."""
        return max(self.max_lag_before - self.max_lag_after, 0)


def rejection_released(rejected: RejectedPlan, situation: GroupSituation | None, benefit: int) -> str | None:
    """Why ``rejected`` no longer holds the group back (in words), None while it holds.

    An unknown situation on either side (plans written before situations were recorded, or a
    caller that gives none) counts as unchanged: only the benefit rule can release it.
    """
    if situation is not None and rejected.situation is not None:
        changed = situation.change_from(rejected.situation)
        if changed:
            return changed
    if benefit > rejected.benefit * (1 + REJECTION_BENEFIT_MARGIN):
        return (
            f"the new plan takes {benefit:,} off the busiest member's lag, more than "
            f"{1 + REJECTION_BENEFIT_MARGIN:g}x the rejected plan's {rejected.benefit:,}"
        )
    return None


def hold_by_rejection(
    advice: GroupAdvice, rejected: RejectedPlan, situation: GroupSituation | None
) -> GroupAdvice:
    """The advice with its recommendation held back by ``rejected`` while it holds (outcome
    ``held_by_rejection``, plan ``skipped``: not stored); else the advice saying it was released."""
    plan = advice.plan
    if plan is None or plan.status != "recommended":
        return advice
    benefit = max((advice.max_lag_before or 0) - plan.metrics.max_member_lag, 0)
    released = rejection_released(rejected, situation, benefit)
    said = f" (reason given: {rejected.note})" if rejected.note else ""
    if released:
        text = f"{advice.reason}; plan {rejected.plan_id} was rejected{said}, recommended again: {released}"
        return dataclasses.replace(advice, reason=text)
    text = (
        f"held back: plan {rejected.plan_id} for this group was rejected{said} and the situation has not "
        "changed since (same members, subscriptions, partitions and assignment in force; the new plan "
        f"takes {benefit:,} off the busiest member, the rejected one {rejected.benefit:,}) (was: {advice.reason})"
    )
    return dataclasses.replace(
        advice, outcome=HELD_BY_REJECTION, reason=text, plan=dataclasses.replace(plan, status="skipped")
    )
