"""Speed-ups of ``sticky`` and of the dict form change no result.

Digests computed with the implementations before they were vectorised (commit 48cdc50):
``sticky`` owners on 400 seeded groups, mostly with differing subscriptions and owned partitions
(the ``_general`` path), and every strategy's public ``assign`` dict (member order, list order,
plain ``str``/``int`` tuples). ``lag_aware_sticky`` is pinned in test_planner_fast_paths.py.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from rebalance_advisor.domain.assignors import ASSIGNORS, sticky
from rebalance_advisor.domain.group_spec import Assignment, GroupSpec, parse_group_spec

from tests._groups import assignment_digest, owners_digest, seeded_group

STICKY_DIGEST = "de1d2dab4f3c06975ff6b94905bfd7f75da05c73b85b081f3b4bbf7e7431ba3c"
ASSIGN_DIGESTS = {
    "range": "1c06f69186e83e53dc764dcc3b66f933a4bf44b3d06c4da58570619ca10f731e",
    "roundrobin": "5b70eb438b705aaaf7e03ac43c82ee2355d019308cad482d98f71eff3ca402cf",
    "sticky": "815159309a72353db85ef6ffc556cbca5bedabde275168c2878afc9c526b1edf",
    "lag_aware": "93c17ff492eeae0e674f7acd7b5cbc4026dc19adaf3872d0136fb7bd8e51ce6e",
    "lag_aware_sticky": "33f380886f1528e33638d584d9b8bcad085922de0e0e6ec3526feb9141aba8b3",
}


def _sticky_digest() -> str:
    return owners_digest(sticky.owners, groups=400, same_share=0.2, seed=20261122)


def test_sticky_results_pinned():
    assert _sticky_digest() == STICKY_DIGEST


def test_sticky_pin_sees_a_skipped_balance_step(monkeypatch):
    """The pin is sensitive: without the balancing moves the differing-subscription digest changes."""
    monkeypatch.setattr(sticky, "_balance_group", lambda *args, **kwargs: False)
    assert _sticky_digest() != STICKY_DIGEST


@pytest.mark.parametrize("name", list(ASSIGN_DIGESTS))
def test_assign_dict_pinned(name):
    assert assignment_digest(ASSIGNORS[name].assign) == ASSIGN_DIGESTS[name]


def _reference_assignment(spec: GroupSpec, owners: np.ndarray) -> Assignment:
    """The dict form spelled out one partition at a time."""
    result: Assignment = {m.member_id: [] for m in spec.members}
    for k, who in enumerate(owners.tolist()):
        if who >= 0:
            topic = spec.topics[int(spec.topic_index[k])]
            result[spec.members[who].member_id].append((topic, int(spec.partition[k])))
    return {m: sorted(parts) for m, parts in result.items()}


def test_to_assignment_matches_reference_with_unassigned_partitions():
    """Random owners arrays (with -1 holes and empty members) give the reference dict, types included."""
    rng = random.Random(3)
    nprng = np.random.default_rng(3)
    for _ in range(100):
        spec = parse_group_spec(seeded_group(rng))
        owners = nprng.integers(-1, spec.num_members, spec.num_partitions).astype(np.int32)
        got = spec.to_assignment(owners)
        expected = _reference_assignment(spec, owners)
        assert list(got) == list(expected)
        assert got == expected
        for parts in got.values():
            assert all(type(tp) is tuple and type(tp[0]) is str and type(tp[1]) is int for tp in parts)
