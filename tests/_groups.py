"""Test helpers: JSON-shaped groups, a hypothesis strategy for random groups, independent checkers."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from hypothesis import strategies as st
from rebalance_advisor.domain.group_spec import GroupSpec, parse_group_spec


def group(members, partitions, group_id="g"):
    """members: list of (member_id, topics, owned=(), generation=None, instance=None) tuples or dicts;
    partitions: {topic: [lags...]}"""
    mem = []
    for m in members:
        if isinstance(m, dict):
            mem.append(m)
            continue
        member_id, topics, *rest = m
        owned = rest[0] if len(rest) > 0 else ()
        generation = rest[1] if len(rest) > 1 else None
        instance = rest[2] if len(rest) > 2 else None
        mem.append(
            {
                "member_id": member_id,
                "group_instance_id": instance,
                "topics": list(topics),
                "owned": [list(tp) for tp in owned],
                "generation": generation,
            }
        )
    parts = [
        {"topic": t, "partition": p, "lag": lag}
        for t, lags in partitions.items()
        for p, lag in enumerate(lags)
    ]
    return {"group_id": group_id, "members": mem, "partitions": parts}


def spec_of(members, partitions):
    return parse_group_spec(group(members, partitions))


@st.composite
def random_groups(draw, identical=None, max_members=6, max_topics=4, max_parts=8):
    """A JSON group: members, subscriptions (identical or not), owned partitions, generations."""
    num_topics = draw(st.integers(1, max_topics))
    topics = [f"t{i}" for i in range(num_topics)]
    sizes = [draw(st.integers(1, max_parts)) for _ in topics]
    lag_values = st.one_of(st.integers(0, 5), st.integers(0, 10**6))
    partitions = {t: [draw(lag_values) for _ in range(n)] for t, n in zip(topics, sizes, strict=True)}
    num_members = draw(st.integers(1, max_members))
    same = draw(st.booleans()) if identical is None else identical
    all_parts = [(t, p) for t, n in zip(topics, sizes, strict=True) for p in range(n)]
    members = []
    ids = draw(
        st.lists(
            st.text("abcXYZ01", min_size=1, max_size=3),
            min_size=num_members,
            max_size=num_members,
            unique=True,
        )
    )
    instances = draw(
        st.lists(
            st.text("pq9", min_size=1, max_size=2), min_size=num_members, max_size=num_members, unique=True
        )
    )
    for i, member_id in enumerate(ids):
        subs = topics if same else draw(st.lists(st.sampled_from(topics), min_size=1, unique=True))
        owned = draw(st.lists(st.sampled_from(all_parts), unique=True, max_size=len(all_parts)))
        members.append(
            {
                "member_id": member_id,
                "group_instance_id": instances[i] if draw(st.booleans()) else None,
                "topics": subs,
                "owned": [list(tp) for tp in owned],
                "generation": draw(st.sampled_from([None, 1, 2, 3])),
            }
        )
    if same and draw(st.booleans()):
        partitions["zz-unsubscribed"] = [7, 8]
    return group(members, partitions)


def kafka_order_ids(data):
    """Member ids in Kafka's order, computed independently of the code under test."""
    ms = data["members"]
    static = sorted(
        (m for m in ms if m.get("group_instance_id") is not None), key=lambda m: m["group_instance_id"]
    )
    dynamic = sorted((m for m in ms if m.get("group_instance_id") is None), key=lambda m: m["member_id"])
    return [m["member_id"] for m in static + dynamic]


def resolved_owned(data):
    """member -> set of valid owned (topic, partition): generation rule, then subscription check."""
    topics_of = {m["member_id"]: set(m["topics"]) for m in data["members"]}
    result = {m["member_id"]: set() for m in data["members"]}
    for tp, member in current_owner(data).items():
        if tp[0] in topics_of[member]:
            result[member].add(tp)
    return result


def current_owner(data):
    """(topic, partition) -> owning member after the generation rule (subscription not checked)."""
    claims = {}
    for m in data["members"]:
        gen = -1 if m.get("generation") is None else m["generation"]
        for t, p in m.get("owned", []):
            claims.setdefault((t, p), []).append((gen, m["member_id"]))
    out = {}
    for tp, cl in claims.items():
        top = max(g for g, _ in cl)
        winners = [mid for g, mid in cl if g == top]
        if len(winners) == 1:
            out[tp] = winners[0]
    return out


def member_lags(data, assignment):
    lag = {(p["topic"], p["partition"]): p["lag"] for p in data["partitions"]}
    return {m: sum(lag[tuple(tp)] for tp in parts) for m, parts in assignment.items()}


def seeded_group(rng: random.Random, same_share: float = 0.5) -> dict[str, Any]:
    """A JSON group from a seeded stream, for digests that pin results across speed-ups.

    Up to 4 topics of up to 150 partitions, up to 25 members owning about 1.5 partitions' worth
    each, generations that collide, lags with many ties; subscriptions identical with
    probability ``same_share``. The draw order is part of every pinned digest: do not change it.
    """
    topics = [f"t{i}" for i in range(rng.randint(1, 4))]
    sizes = [rng.randint(1, rng.choice([3, 8, 30, 150])) for _ in topics]
    style = rng.random()

    def lag() -> int:
        if style < 0.3:
            return rng.randint(0, 5)  # many ties
        if style < 0.6:
            return rng.choice([0, 10, 10, 100, 1000])
        return rng.randint(0, 10**6)

    parts = [
        {"topic": t, "partition": p, "lag": lag()}
        for t, n in zip(topics, sizes, strict=True)
        for p in range(n)
    ]
    keys = [(p["topic"], p["partition"]) for p in parts]
    count = rng.randint(1, rng.choice([3, 6, 12, 25]))
    same = rng.random() < same_share
    members = []
    for m in range(count):
        subscribed = topics if same else rng.sample(topics, rng.randint(1, len(topics)))
        owned = [list(k) for k in keys if rng.random() < 1.5 / count]
        members.append(
            {"member_id": f"m{m:02d}", "topics": list(subscribed), "owned": owned,
             "generation": rng.choice([None, 1, 1, 2])}
        )  # fmt: skip
    return {"group_id": "g", "members": members, "partitions": parts}


def owners_digest(
    owners_fn: Callable[..., np.ndarray],
    option_sets: Callable[[random.Random], list[dict[str, Any]]] = lambda rng: [{}],
    groups: int = 200,
    same_share: float = 0.5,
    seed: int = 20261121,
) -> str:
    """sha256 over ``owners_fn(spec, **options)`` for seeded groups and each of their option sets."""
    rng = random.Random(seed)
    digest = hashlib.sha256()
    for _ in range(groups):
        spec = parse_group_spec(seeded_group(rng, same_share))
        for options in option_sets(rng):
            digest.update(owners_fn(spec, **options).astype("<i4").tobytes())
            digest.update(b"|")
    return digest.hexdigest()


def assignment_digest(assign_fn: Callable[[GroupSpec], dict], groups: int = 200, seed: int = 7) -> str:
    """sha256 over the dict form ``assign_fn`` returns (member order, list order, value types)."""
    rng = random.Random(seed)
    digest = hashlib.sha256()
    for _ in range(groups):
        assignment = assign_fn(parse_group_spec(seeded_group(rng)))
        digest.update(repr(list(assignment.items())).encode())  # repr shows tuple vs list, int vs np.int
        digest.update(b"|")
    return digest.hexdigest()


def seeded_document(rng: random.Random, now: datetime) -> dict[str, Any]:
    """A planner document from a seeded stream: :func:`seeded_group` with what production adds, drawn
    independently (rates known for none, some or all partitions; capacities for none, some or all
    members with their sources; the last interval's evidence; recent moves; the rate interval), and
    the trivial shapes too (one member, no lag, no rates). For checks that a speed-up of
    ``plan_group`` changes no advice: the same documents planned both ways."""
    doc = seeded_group(rng, same_share=0.7)
    shape = rng.random()
    if shape < 0.25:  # one member, as most small groups of a fleet
        doc["members"] = doc["members"][:1]
    if shape < 0.1 or shape > 0.9:  # nothing behind
        for p in doc["partitions"]:
            p["lag"] = 0 if rng.random() < 0.8 else rng.randint(0, 5)
    rates = rng.choice(("none", "some", "all", "all"))
    for p in doc["partitions"]:
        if rates == "all" or (rates == "some" and rng.random() < 0.6):
            p["produce_rate"] = rng.choice([0.0, rng.uniform(0.0, 50.0), rng.uniform(0.0, 2_000.0)])
    capacities = rng.choice(("none", "some", "all", "all"))
    sources = {}
    for m in doc["members"]:
        if capacities == "all" or (capacities == "some" and rng.random() < 0.5):
            m["capacity"] = rng.uniform(5.0, 3_000.0)
            sources[m["member_id"]] = rng.choice(
                ["measured", "measured", "group_median", "own_rate", "reported"]
            )
    keys = [(p["topic"], p["partition"]) for p in doc["partitions"]]
    ids = [m["member_id"] for m in doc["members"]]
    at = (now - timedelta(seconds=rng.uniform(0, 3_000))).isoformat()
    extra: dict[str, Any] = {
        "weight": "lag",
        "note": None,
        "standing": None,
        "capacity_sources": sources,
        "rate_interval_s": rng.choice([None, 10.0, 60.0, 300.0]),
        "recent_moves": [
            {"topic": t, "partition": p, "from": rng.choice(ids), "to": rng.choice(ids), "at": at}
            for t, p in rng.sample(keys, min(len(keys), rng.choice([0, 0, 1, 3])))
        ],
    }
    if rng.random() < 0.5:
        extra["interval"] = {
            "seconds": rng.choice([10.0, 60.0, 300.0]),
            "rates": [[t, p, rng.uniform(0.0, 2_000.0)] for t, p in keys if rng.random() < 0.7],
            "lags_before": [[t, p, rng.randint(0, 10**5)] for t, p in keys if rng.random() < 0.8],
            "held_throughout": [m for m in ids if rng.random() < 0.6],
        }
    doc.update(extra)
    doc["group_id"] = f"g{rng.randrange(10**9):09d}"
    return doc
