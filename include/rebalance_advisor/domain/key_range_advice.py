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

The load key_range splits by is the rules' member load (records/s of inflow plus backlog over the
horizon); its capacity is the least known capacity among the flagged members (None when unknown).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

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
    spec: GroupSpec, thresholds: Thresholds, sharing: KeySharingInputs, inputs: LoadInputs
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
    return range_view(spec, plan, sharing.samples)


def _shares(sample: KeySample, bounds: list[tuple[int, int]]) -> np.ndarray:
    """Each range's share of the sample's records."""
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
    spec: GroupSpec, plan: KeyRangePlan, samples: Mapping[tuple[str, int], KeySample]
) -> RangedCandidate:
    """The spec with each split partition replaced by its ranges (module docstring), and the owners."""
    member_index = {m: i for i, m in enumerate(spec.member_ids)}
    by_partition: dict[tuple[str, int], list[Any]] = {}
    for r in plan.ranges:
        by_partition.setdefault((r.topic, r.partition), []).append(r)
    rate = spec.produce_rate
    idx: list[int] = []
    lag: list[int] = []
    rates: list[float] = []
    owners: list[int] = []
    ranges: list[tuple[int, int] | None] = []
    for k, key in enumerate(spec.partition_keys):
        parts = by_partition.get(key)
        if not parts:
            idx.append(k)
            lag.append(int(spec.lag[k]))
            rates.append(np.nan if rate is None else float(rate[k]))
            owners.append(int(plan.owners[k]))
            ranges.append(None)
            continue
        shares = _shares(samples[key], [(r.hash_lo, r.hash_hi) for r in parts])
        lag.extend(_split_int(int(spec.lag[k]), shares).tolist())
        for r, share in zip(parts, shares, strict=True):
            idx.append(k)
            rates.append(np.nan if rate is None else float(rate[k]) * float(share))
            owners.append(member_index[r.member_id])
            ranges.append((r.hash_lo, r.hash_hi))
    pick = np.asarray(idx, dtype=np.int64)
    topic_index = spec.topic_index[pick]
    arrays = {
        "topic_index": topic_index,
        "partition": spec.partition[pick],
        "lag": np.asarray(lag, dtype=np.int64),
        "topic_start": np.searchsorted(topic_index, np.arange(len(spec.topics) + 1)).astype(np.int64),
        "owner": spec.owner[pick],
        "owner_valid": spec.owner_valid[pick],
        "produce_rate": None if rate is None else np.asarray(rates, dtype=np.float64),
    }
    for arr in arrays.values():
        if arr is not None:
            arr.setflags(write=False)
    view = dataclasses.replace(spec, **arrays)
    view_owners = np.asarray(owners, dtype=np.int32)
    view_owners.setflags(write=False)
    return RangedCandidate(plan, view, view_owners, tuple(ranges))


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
