"""How a plan reaches a group's consumers: the one rule, and the labels the plan table stores.

Three ways (docs/operations/broker-applied-plans.md, "Which plans the broker applies"):

- ``static assignments``: the group has registered manual-assign members (``assign()`` consumers
  running the client helper); the publisher writes each member's record to the assignment topic.
- ``broker assignor``: the group is on the consumer protocol (KIP-848) and its group assignor is
  the broker plugin's (``advised``); the publisher writes the group's plan record and the broker's
  assignor applies it at the next re-assignment. No client code of ours.
- ``advice only``: anything else (a classic ``subscribe()`` group, or a KIP-848 group on
  ``uniform`` or ``range``): nothing the advisor writes reaches its consumers.
"""

from __future__ import annotations

from typing import Final, Literal

ApplyMode = Literal["static assignments", "broker assignor", "advice only"]

STATIC: Final[ApplyMode] = "static assignments"
BROKER: Final[ApplyMode] = "broker assignor"
ADVICE: Final[ApplyMode] = "advice only"
APPLY_MODES: Final[tuple[ApplyMode, ...]] = (STATIC, BROKER, ADVICE)

#: the broker plugin's assignor name (``ConsumerGroupPartitionAssignor.name()``), the one consumers
#: pick with ``group.remote.assignor``; the plugin's default
BROKER_ASSIGNOR: Final = "advised"
#: ``Group.group_type`` of a KIP-848 group (the snapshot's value)
CONSUMER_PROTOCOL: Final = "consumer"


def apply_mode(
    manual_assign: bool,
    group_type: str | None,
    assignor: str | None,
    broker_assignor: str = BROKER_ASSIGNOR,
) -> ApplyMode:
    """Which way a group's plan is applied.

    ``manual_assign``: the group has registered static members; ``group_type`` and ``assignor``:
    the group as the newest snapshot saw it (``None`` when no snapshot holds it). Registered members
    win: an operator who registered ``assign()`` consumers asked for static assignments.
    """
    if manual_assign:
        return STATIC
    if group_type == CONSUMER_PROTOCOL and (assignor or "").strip() == broker_assignor:
        return BROKER
    return ADVICE


def is_applied(mode: str) -> bool:
    """Whether a plan applied this way can be approved and published (not advice only)."""
    return mode in (STATIC, BROKER)
