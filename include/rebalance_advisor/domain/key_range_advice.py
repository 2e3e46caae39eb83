"""key_range inside an advisor run: its inputs in a group document, and how the rules see a range.

The driver (``adapters.key_sampling.attach_key_samples``) puts into a group's document, under
``key_sharing``, the members the registry flags ``--share-keys`` and a bounded key sample per
candidate partition: ``{"members": [...], "samples": [{"topic", "partition", "hashes", "counts"}]}``
(distinct positive murmur2 hashes ascending, the sampled record count of each).
:func:`ranged_candidate` then plans the group with :func:`key_range.plan` under the run's policy.

How the decision rules see a range (one definition, here): a range of a split partition is a
partition of its own whose lag and produce rate are the partition's times the range's share of
the partition's *sampled records*. :func:`range_view` builds that view as a :class:`GroupSpec`
(each split partition replaced by one entry per range, owned now by the partition's current
owner), so the metrics, the load model and ``decisions.decide`` compare a ranged plan with the
whole-partition ones without knowing about ranges; a range given to a member other than the
partition's current owner counts as one handover.

The current ranges (a published ranged plan): the document's ``current_ranges`` lists each
range of the group's latest published plan with its member and how far behind it is (records of
the partition below the log end its owner has not passed: ``end`` minus the range's progress from
the derived groups' commits). :func:`current_range_view` is the current assignment in the same
range view: each split partition replaced by its current ranges, owned by their members, lag =
how far behind times the range's share (of the sample when there is one, else of the hash width).
The rules measure the group's state in that view, so a stable ranged group is owned and balanced,
not "unowned lag". A candidate range counts as a handover unless one member's current range (or
whole partition) covers it and that member keeps it.

The load key_range splits by is the rules' member load (records/s of inflow plus backlog over the
horizon); its capacity is the least known capacity among the flagged members (None when unknown).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from rebalance_advisor_client.key_hash import HASH_SPACE, range_cover_problem

from rebalance_advisor.domain.assignors import key_range
from rebalance_advisor.domain.assignors.key_range import KeyRangePlan, KeySample, KeySharingPolicy
from rebalance_advisor.domain.group_spec import GroupSpec
from rebalance_advisor.domain.load_model import LoadInputs
from rebalance_advisor.domain.parameters import Thresholds
from rebalance_advisor.errors import AdvisorError


@dataclass(frozen=True, eq=False)
class KeySharingInputs:
    """What the driver found for one group: flagged members and the key samples it read."""

    members: frozenset[str]
    samples: Mapping[tuple[str, int], KeySample]

    def to_doc(self) -> dict[str, Any]:
        return {
            "members": sorted(self.members),
            "samples": [
                {
                    "topic": t,
                    "partition": p,
                    "hashes": s.hashes.tolist(),
                    "counts": s.counts.tolist(),
                }
                for (t, p), s in sorted(self.samples.items())
            ],
        }

    @classmethod
    def from_doc(cls, raw: Any) -> KeySharingInputs | None:
        """The document's ``key_sharing`` (None when absent); AdvisorError names what is malformed."""
        if raw is None:
            return None
        if not isinstance(raw, dict) or set(raw) != {"members", "samples"}:
            raise AdvisorError("key_sharing must be an object with members and samples")
        members = raw["members"]
        if not isinstance(members, list) or not all(isinstance(m, str) and m for m in members):
            raise AdvisorError("key_sharing.members must be a list of member ids")
        samples: dict[tuple[str, int], KeySample] = {}
        for item in raw["samples"] if isinstance(raw["samples"], list) else [None]:
            if not isinstance(item, dict) or set(item) != {"topic", "partition", "hashes", "counts"}:
                raise AdvisorError("key_sharing.samples: each entry needs topic, partition, hashes, counts")
            hashes = np.asarray(item["hashes"], dtype=np.int64)
            counts = np.asarray(item["counts"], dtype=np.int64)
            if hashes.shape != counts.shape or hashes.ndim != 1 or (counts < 1).any():
                raise AdvisorError(
                    f"key_sharing.samples {item['topic']}-{item['partition']}: hashes and counts "
                    "must be lists of equal length, counts >= 1"
                )
            sample = KeySample.from_hashes(np.repeat(hashes, counts))
            samples[str(item["topic"]), int(item["partition"])] = sample
        return cls(frozenset(members), samples)


@dataclass(frozen=True)
class CurrentRange:
    """One key range of the group's latest published plan, and how far behind its owner is."""

    member_id: str
    topic: str
    partition: int
    hash_lo: int
    hash_hi: int
    behind: int  # records of the partition below the log end the range's owner has not passed

    def to_doc(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def current_ranges_from_doc(raw: Any) -> tuple[CurrentRange, ...]:
    """The document's ``current_ranges`` (empty when absent); AdvisorError names what is malformed."""
    if raw is None:
        return ()
    fields = [f.name for f in dataclasses.fields(CurrentRange)]
    if not isinstance(raw, list):
        raise AdvisorError(f"current_ranges must be a list of {{{', '.join(fields)}}}")
    out = []
    for j, item in enumerate(raw):
        if not isinstance(item, dict) or set(item) != set(fields):
            raise AdvisorError(f"current_ranges[{j}] must have exactly {', '.join(fields)}")
        if not isinstance(item["member_id"], str) or not isinstance(item["topic"], str):
            raise AdvisorError(f"current_ranges[{j}]: member_id and topic must be strings")
        numbers = [item[f] for f in fields[2:]]
        if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in numbers):
            raise AdvisorError(f"current_ranges[{j}]: partition, bounds and behind must be integers >= 0")
        out.append(CurrentRange(item["member_id"], item["topic"], *numbers))
    return tuple(out)


def _current_by_partition(
    spec: GroupSpec, current: tuple[CurrentRange, ...]
) -> dict[tuple[str, int], list[CurrentRange]]:
    """Current ranges per partition of the spec, only where they tile the hash space (else ignored)."""
    by_partition: dict[tuple[str, int], list[CurrentRange]] = {}
    for r in current:
        by_partition.setdefault((r.topic, r.partition), []).append(r)
    keys = set(spec.partition_keys)
    return {
        tp: sorted(rs, key=lambda r: r.hash_lo)
        for tp, rs in by_partition.items()
        if tp in keys and range_cover_problem([(r.hash_lo, r.hash_hi) for r in rs]) is None
    }


@dataclass(frozen=True, eq=False)
class RangedCandidate:
    """key_range's plan for a group and the range view the rules measure it in (module docstring)."""

    plan: KeyRangePlan
    view: GroupSpec  # one entry per whole partition or per range
    view_owners: np.ndarray  # int32 over ``view``
    #: per view entry: (hash_lo, hash_hi) of a range, None for a whole partition
    view_ranges: tuple[tuple[int, int] | None, ...]


def rule_load(spec: GroupSpec, inputs: LoadInputs, horizon_s: float) -> np.ndarray:
    """Per partition, the rules' load unit: records/s of inflow plus backlog over the horizon."""
    return inputs.rate + spec.lag.astype(np.float64) / horizon_s


def ranged_candidate(
    spec: GroupSpec,
    thresholds: Thresholds,
    sharing: KeySharingInputs,
    inputs: LoadInputs,
    current: tuple[CurrentRange, ...] = (),
) -> RangedCandidate:
    """Plan ``spec`` with key_range under the run's policy and build its range view."""
    policy = KeySharingPolicy.from_run(thresholds, sharing.members)
    capacity = None
    if inputs.capacity is not None:
        flagged = [i for i, m in enumerate(spec.member_ids) if m in sharing.members]
        if flagged:
            capacity = float(np.min(inputs.capacity[flagged]))
    plan = key_range.plan(
        spec, policy, sharing.samples, capacity, rule_load(spec, inputs, thresholds.horizon_s)
    )
    return range_view(spec, plan, sharing.samples, current)


def _shares(sample: KeySample | None, bounds: list[tuple[int, int]]) -> np.ndarray:
    """Each range's share of the sample's records (of the hash width without a sample)."""
    if sample is None or sample.total == 0:
        return np.asarray([(hi - lo) / HASH_SPACE for lo, hi in bounds], dtype=np.float64)
    cum = np.concatenate([[0], np.cumsum(sample.counts)])
    lo = np.searchsorted(sample.hashes, [b[0] for b in bounds], side="left")
    hi = np.searchsorted(sample.hashes, [b[1] for b in bounds], side="left")
    return (cum[hi] - cum[lo]) / float(sample.total)


def _split_int(total: int, shares: np.ndarray) -> np.ndarray:
    """``total`` in parts proportional to ``shares``, rounded so that they add up exactly."""
    edges = np.rint(np.concatenate([[0.0], np.cumsum(shares)]) * total).astype(np.int64)
    edges[-1] = total
    return np.diff(edges)


def range_view(
    spec: GroupSpec,
    plan: KeyRangePlan,
    samples: Mapping[tuple[str, int], KeySample],
    current: tuple[CurrentRange, ...] = (),
) -> RangedCandidate:
    """The spec with each split partition replaced by its ranges (module docstring), and the owners.

    The view's current owner of a range: the member whose current range (or whole partition)
    covers it; -1 when none does (giving it to anyone is a handover)."""
    member_index = {m: i for i, m in enumerate(spec.member_ids)}
    by_partition: dict[tuple[str, int], list[Any]] = {}
    for r in plan.ranges:
        by_partition.setdefault((r.topic, r.partition), []).append(r)
    held_ranges = _current_by_partition(spec, current)
    keys = spec.partition_keys
    view, idx, parts = _split_view(
        spec,
        by_partition,
        samples,
        lambda k, _, shares: _split_int(int(spec.lag[k]), shares),
        lambda k, r: _holder(spec, k, held_ranges.get(keys[k], ()), r.hash_lo, r.hash_hi, member_index),
    )
    view_owners = np.asarray(
        [
            int(plan.owners[k]) if r is None else member_index[r.member_id]
            for k, r in zip(idx, parts, strict=True)
        ],
        dtype=np.int32,
    )
    view_owners.setflags(write=False)
    ranges = tuple(None if r is None else (r.hash_lo, r.hash_hi) for r in parts)
    return RangedCandidate(plan, view, view_owners, ranges)


def _split_view(
    spec: GroupSpec,
    split: Mapping[tuple[str, int], Sequence[Any]],
    samples: Mapping[tuple[str, int], KeySample],
    range_lags: Callable[[int, Sequence[Any], np.ndarray], np.ndarray],
    range_holder: Callable[[int, Any], int],
) -> tuple[GroupSpec, list[int], list[Any]]:
    """The one loop behind both range views: ``spec`` with each partition in ``split`` replaced by
    its ranges (items with ``hash_lo``/``hash_hi``), the others whole. Returns the view, each entry's
    partition index and its range (None: whole). A range's rate is the partition's times its share
    (``_shares``); ``range_lags(k, ranges, shares)`` gives its lags, ``range_holder(k, range)`` its holder."""
    rate = spec.produce_rate
    idx: list[int] = []
    lag: list[int] = []
    rates: list[float] = []
    holders: list[int] = []
    parts: list[Any] = []
    for k, key in enumerate(spec.partition_keys):
        ranges = split.get(key)
        if not ranges:
            idx.append(k)
            lag.append(int(spec.lag[k]))
            rates.append(np.nan if rate is None else float(rate[k]))
            holders.append(int(spec.owner[k]))
            parts.append(None)
            continue
        shares = _shares(samples.get(key), [(r.hash_lo, r.hash_hi) for r in ranges])
        lag.extend(range_lags(k, ranges, shares).tolist())
        for r, share in zip(ranges, shares, strict=True):
            idx.append(k)
            rates.append(np.nan if rate is None else float(rate[k]) * float(share))
            holders.append(range_holder(k, r))
            parts.append(r)
    return _view(spec, idx, lag, rates, holders), idx, parts


def _holder(spec: GroupSpec, k: int, held: Any, lo: int, hi: int, member_index: Mapping[str, int]) -> int:
    """Who holds ``[lo, hi)`` of partition ``k`` now: its whole owner, or the member of the one
    current range covering it; -1 when nobody holds all of it."""
    if not held:
        return int(spec.owner[k])
    for r in held:
        if r.hash_lo <= lo and hi <= r.hash_hi:
            return member_index.get(r.member_id, -1)
    return -1


def _view(
    spec: GroupSpec, idx: list[int], lag: list[int], rates: list[float], holders: list[int]
) -> GroupSpec:
    """``spec`` over the entries ``idx`` (partitions repeated per range) with their lags, rates, holders."""
    pick = np.asarray(idx, dtype=np.int64)
    topic_index = spec.topic_index[pick]
    owner = np.asarray(holders, dtype=np.int32)
    valid = owner >= 0
    # a holder must still subscribe to the topic (as spec.owner_valid says for whole partitions)
    valid[valid] = spec.class_topics[spec.member_class[owner[valid]], topic_index[valid]]
    arrays = {
        "topic_index": topic_index,
        "partition": spec.partition[pick],
        "lag": np.asarray(lag, dtype=np.int64),
        "topic_start": np.searchsorted(topic_index, np.arange(len(spec.topics) + 1)).astype(np.int64),
        "owner": owner,
        "owner_valid": valid,
        "produce_rate": None if spec.produce_rate is None else np.asarray(rates, dtype=np.float64),
    }
    for arr in arrays.values():
        if arr is not None:
            arr.setflags(write=False)
    return dataclasses.replace(spec, **arrays)


def current_range_view(
    spec: GroupSpec,
    current: tuple[CurrentRange, ...],
    samples: Mapping[tuple[str, int], KeySample] | None = None,
) -> GroupSpec | None:
    """The current assignment in the range view (module docstring); None when no range applies."""
    held_ranges = _current_by_partition(spec, current)
    if not held_ranges:
        return None
    member_index = {m: i for i, m in enumerate(spec.member_ids)}
    view, _, _ = _split_view(
        spec, held_ranges, samples or {}, _behind_lags, lambda _, r: member_index.get(r.member_id, -1)
    )
    return view


def _behind_lags(_: int, held: Sequence[CurrentRange], shares: np.ndarray) -> np.ndarray:
    """Current ranges' lags: how far behind each is times its share."""
    behind = {r.behind for r in held}
    if len(behind) == 1:  # all ranges equally far: the same split as a candidate's view
        return _split_int(behind.pop(), shares)
    return np.rint([r.behind * sh for r, sh in zip(held, shares, strict=True)]).astype(int)


def range_rows(candidate: RangedCandidate) -> tuple[tuple[str, str, int, int, int, int], ...]:
    """``ChosenPlan.key_ranges``: (member, topic, partition, estimated lag, hash_lo, hash_hi) per range."""
    view = candidate.view
    ids, topics = view.member_ids, view.topics
    return tuple(
        (
            ids[int(candidate.view_owners[i])],
            topics[int(view.topic_index[i])],
            int(view.partition[i]),
            int(view.lag[i]),
            bounds[0],
            bounds[1],
        )
        for i, bounds in enumerate(candidate.view_ranges)
        if bounds is not None
    )
