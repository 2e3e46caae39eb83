"""``range`` and ``roundrobin`` against Kafka's own Java RangeAssignor and RoundRobinAssignor.

One JVM (Java 17's single-file source launcher on tests/support/KafkaAssignorReference.java, with
the cached kafka-clients jar) assigns a few hundred seeded random groups; ours must give the same
partitions to every member of every group. No broker is needed, only Java and the cached jars.
"""

from __future__ import annotations

import random

import pytest
from rebalance_advisor.domain.assignors import ASSIGNORS
from rebalance_advisor.domain.group_spec import parse_group_spec

from tests._groups import seeded_group
from tests.support.kafka_java import run_reference

GROUPS = 240

#: member and instance id pieces whose order differs between naive code point order and Java's
#: String.compareTo (UTF-16 code units): upper before lower case, a prefix before its extensions,
#: an astral character (a surrogate pair, 0xD83D...) before U+FF5E.
PIECES = ["a", "b", "B", "Z", "m", "é", "\uff5e", "\U0001f600", "1", "-", "_"]


def _random_ids(rng: random.Random, count: int) -> list[str]:
    ids: set[str] = set()
    while len(ids) < count:
        ids.add("".join(rng.choice(PIECES) for _ in range(rng.randint(1, 3))))
    return rng.sample(sorted(ids), count)


def _groups() -> list[dict]:
    rng = random.Random(20260401)
    out = []
    for g in range(GROUPS):
        data = seeded_group(rng, same_share=0.5)
        data["group_id"] = f"g{g}"
        members = data["members"]
        ids = _random_ids(rng, len(members))
        instances = _random_ids(rng, len(members))
        static_share = rng.choice([0.0, 0.3, 1.0])
        for m, member_id, instance in zip(members, ids, instances, strict=True):
            m["member_id"] = member_id
            m["group_instance_id"] = instance if rng.random() < static_share else None
        rng.shuffle(members)
        out.append(data)
    return out


def _reference_input(groups: list[dict]) -> str:
    lines = []
    for data in groups:
        lines.append(f"group {data['group_id']}")
        sizes: dict[str, int] = {}
        for p in data["partitions"]:
            sizes[p["topic"]] = sizes.get(p["topic"], 0) + 1
        lines += [f"topic {t} {n}" for t, n in sizes.items()]
        for m in data["members"]:
            instance = m.get("group_instance_id") or "."  # "." is never an id here
            lines.append(f"member {m['member_id']} {instance} {','.join(m['topics'])}")
        lines.append("end")
    return "\n".join(lines) + "\n"


def _run_reference(text: str) -> dict[tuple[str, str], dict[str, list[tuple[str, int]]]]:
    out: dict[tuple[str, str], dict[str, list[tuple[str, int]]]] = {}
    for line in run_reference("KafkaAssignorReference", text).splitlines():
        strategy, group_id, member_id, *rest = line.split(" ")
        parts = sorted((rest[i], int(rest[i + 1])) for i in range(0, len(rest), 2))
        out.setdefault((strategy, group_id), {})[member_id] = parts
    return out


@pytest.mark.slow
def test_range_and_roundrobin_equal_kafkas_java_assignors():
    groups = _groups()
    reference = _run_reference(_reference_input(groups))
    static_groups = sum(any(m["group_instance_id"] for m in g["members"]) for g in groups)
    differing = sum(len({tuple(sorted(m["topics"])) for m in g["members"]}) > 1 for g in groups)
    assert static_groups > GROUPS // 3 and differing > GROUPS // 4  # the sample covers both cases
    for data in groups:
        spec = parse_group_spec(data)
        for strategy in ("range", "roundrobin"):
            ours = {m: list(parts) for m, parts in ASSIGNORS[strategy].assign(spec).items()}
            assert ours == reference[strategy, data["group_id"]], (strategy, data)
