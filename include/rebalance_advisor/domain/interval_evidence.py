"""The last snapshot interval's own evidence, beside the smoothed rates (docs/architecture.md, "The
load model"). Pure, no I/O.

Rates change in steps, and an EWMA with τ = 120 s shows 63 % of a step after τ: for a snapshot or
several after a step, the smoothed rates say a member is under its capacity while it is already
over it (bench/drain.py, the step scenarios). Two pieces of evidence come with every snapshot and are
not smoothed:

- each partition's produce rate over the last interval alone (Δ end offset / Δt);
- each partition's lag at the interval's start, when the member holding it now held it then: a
  member that held the same partitions throughout and whose backlog grew across the interval did
  not keep up, whatever the smoothed rates say.

:func:`interval_observations` reads them from the carried state of the previous snapshot and the
current offsets and owners (the store's planner reader and the simulator call it alike);
:class:`IntervalObservation` is one group's part, carried in its planning document under
``interval`` (:meth:`IntervalObservation.to_doc`). The load model decides what they mean
(``load_model.with_interval_evidence``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rebalance_advisor.domain.estimates import Carried, RateParameters, rate_interval_problem

#: (topic, partition)
TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class IntervalObservation:
    """One group's evidence over the last snapshot interval (module docstring)."""

    #: the interval's length in seconds
    seconds: float
    #: (topic, partition) -> Δ end offset / Δt over the interval alone (records/s)
    rates: Mapping[TopicPartition, float] = field(default_factory=dict)
    #: (topic, partition) -> its lag at the interval's start, for partitions whose owner now owned it then
    lags_before: Mapping[TopicPartition, int] = field(default_factory=dict)
    #: members (as plans name them) that held exactly their present partitions throughout the interval
    held_throughout: frozenset[str] = frozenset()

    def to_doc(self) -> dict[str, Any]:
        """The document form (JSON): lists, sorted, so equal evidence gives equal documents."""
        return {
            "seconds": self.seconds,
            "rates": [[t, p, r] for (t, p), r in sorted(self.rates.items())],
            "lags_before": [[t, p, lag] for (t, p), lag in sorted(self.lags_before.items())],
            "held_throughout": sorted(self.held_throughout),
        }

    @classmethod
    def from_doc(cls, doc: Any) -> IntervalObservation | None:
        """The evidence of a planning document's ``interval`` (None when absent or not usable: a
        hand-written plan document has none, and the rules then use the smoothed rates alone)."""
        if not isinstance(doc, dict):
            return None
        try:
            seconds = float(doc["seconds"])
            rates = {(str(t), int(p)): float(r) for t, p, r in doc.get("rates") or ()}
            lags = {(str(t), int(p)): int(lag) for t, p, lag in doc.get("lags_before") or ()}
            held = frozenset(str(m) for m in doc.get("held_throughout") or ())
        except (KeyError, TypeError, ValueError):
            return None
        if not (math.isfinite(seconds) and seconds > 0):
            return None
        return cls(seconds, rates, lags, held)


def interval_observations(
    previous: Carried | None,
    taken_at: datetime,
    lag_ends: Mapping[TopicPartition, int | None],
    committed: Mapping[str, Mapping[TopicPartition, int]],
    members: Mapping[str, Sequence[tuple[str, Sequence[TopicPartition]]]],
    params: RateParameters | None = None,
) -> dict[str, IntervalObservation]:
    """group -> its :class:`IntervalObservation` between ``previous`` and now (empty when the interval
    gives no rates: no previous snapshot, too short or too long).

    ``lag_ends``: the offsets lags are against now; ``committed``: group -> committed offsets now;
    ``members``: group -> (member as plans name it, what it holds now). Rates use the lag ends at
    both snapshots (the log end, or the LSO under read_committed) so that rate and lag agree.
    """
    if previous is None:
        return {}
    seconds = (taken_at - previous.taken_at).total_seconds()
    if rate_interval_problem(seconds, params or RateParameters()) is not None:
        return {}
    rates = _interval_rates(previous, lag_ends, seconds)
    out: dict[str, IntervalObservation] = {}
    for group_id, held in members.items():
        owners = {tp: name for name, parts in held for tp in parts}
        group_rates = {tp: rates[tp] for tp in owners if tp in rates}
        lags = _lags_before(previous, group_id, owners, committed.get(group_id, {}))
        throughout = frozenset(
            name for name, parts in held if _held_throughout(previous, group_id, name, parts)
        )
        out[group_id] = IntervalObservation(seconds, group_rates, lags, throughout)
    return out


def _interval_rates(
    previous: Carried, lag_ends: Mapping[TopicPartition, int | None], seconds: float
) -> dict[TopicPartition, float]:
    out = {}
    for tp, e1 in lag_ends.items():
        e0 = previous.lag_ends.get(tp)
        if e0 is not None and e1 is not None and e1 >= e0:
            out[tp] = (e1 - e0) / seconds
    return out


def _lags_before(
    previous: Carried,
    group_id: str,
    owners: Mapping[TopicPartition, str],
    committed: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """Lag at the previous snapshot of the partitions whose owner now owned them then (and were
    committed at both ends)."""
    out = {}
    for tp, name in owners.items():
        key = (group_id, *tp)
        c0, e0 = previous.committed.get(key), previous.lag_ends.get(tp)
        if previous.owners.get(key) == name and c0 is not None and e0 is not None and tp in committed:
            out[tp] = max(e0 - c0, 0)
    return out


def _held_throughout(previous: Carried, group_id: str, name: str, parts: Iterable[TopicPartition]) -> bool:
    """It owned each of its partitions at the previous snapshot, and no others (as ``estimates``
    decides whether a member can be measured over the interval)."""
    mine = [(group_id, *tp) for tp in parts]
    if not mine or any(previous.owners.get(k) != name for k in mine):
        return False
    return previous.held_counts[(group_id, name)] == len(mine)
