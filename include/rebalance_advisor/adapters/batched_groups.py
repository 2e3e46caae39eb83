"""Consumer groups described and their committed offsets read many groups per request, through Kafka's
Java AdminClient.

librdkafka (confluent-kafka 2.16.1) sends one DescribeGroups and one OffsetFetch request per group
(its ListConsumerGroupOffsets takes exactly one group per call), so a snapshot's cost grows with the
fleet. Kafka's Java AdminClient puts every group of a coordinator into one request (KIP-709 for
OffsetFetch). This adapter runs ``include/kafka/GroupReaders.java`` in mode ``batched-groups``
(compiled once into the jar cache; the share-group reader is the same program's other mode) and
reads one JSON line per group back, mapped to the values the per-group route gives;
docs/concepts/snapshots.md ("Fleet scale") has the measurements.

The JVM starts when the pass knows it has many groups (:func:`start`) and connects while the
cluster metadata is read. The client configuration reaches the JVM on stdin, never on its command
line. When the reader cannot run at all (no cached jars, no Java, a security setting the Java client
cannot be given here, or the JVM failing), :class:`ReaderUnavailable` says why and the snapshot
takes librdkafka's per-group route instead.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rebalance_advisor.adapters import kafka_jars
from rebalance_advisor.adapters.share_groups import ShareGroupsUnavailable, java_config
from rebalance_advisor.domain.snapshot_model import Group, GroupMemberSnapshot

#: the reader of include/kafka/GroupReaders.java this adapter runs
MODE = "batched-groups"
#: C1 only and the serial collector: the JVM lives for one pass, start-up dominates at small sizes.
#: The heap holds the answers for the whole fleet (65,000 groups, 300,000 offsets: bench/snapshot.py).
JVM_OPTIONS = ("-Xmx768m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto")

#: Java's ``GroupState`` names where confluent-kafka's ``ConsumerGroupState`` names differ: the stored
#: state is the per-group route's. (Java's ASSIGNING/RECONCILING of KIP-848 groups have no
#: confluent-kafka name, and are kept as Java names them.)
_STATE_NAMES = {
    "PREPARING_REBALANCE": "preparing_rebalancing",
    "COMPLETING_REBALANCE": "completing_rebalancing",
}


class ReaderUnavailable(Exception):
    """The batched reader cannot run; the message says why (the per-group route is taken instead)."""


@dataclass(frozen=True)
class ReaderErrorCode:
    """A group's failure as the reader names it, shaped like confluent-kafka's ``KafkaError``
    (``name()``, ``str()``) so the snapshot records and classifies both routes' errors alike."""

    code: str
    message: str

    def name(self) -> str:
        return self.code

    def str(self) -> str:
        return self.message


class GroupReadFailed(Exception):
    """One group's description or offsets could not be read; ``args[0]`` is a :class:`ReaderErrorCode`."""


#: (topic, partition, offset, leader epoch or None, metadata) as the reader prints them
OffsetRow = tuple[str, int, int, int | None, str]


@dataclass(frozen=True)
class GroupRead:
    """One group as the reader saw it: described (or why not), its committed offsets (or why not)."""

    group: Group | GroupReadFailed
    offsets: list[OffsetRow] | GroupReadFailed


class BatchedGroupReader:
    """One JVM describing the groups given to :meth:`read` and reading their committed offsets."""

    def __init__(self, process: subprocess.Popen, timeout_s: float) -> None:
        self._process = process
        self._timeout_s = timeout_s

    def read(self, group_ids: list[str], keep_topic: Callable[[str], bool]) -> dict[str, GroupRead]:
        """Every group asked, described and with its offsets (or the errors it met); member
        assignments keep only topics ``keep_topic`` accepts, as the per-group route's do."""
        bound = self._timeout_s * 2 + 30
        try:
            out, err = self._process.communicate(json.dumps(group_ids) + "\n", timeout=bound)
        except subprocess.TimeoutExpired:
            self.close()
            raise ReaderUnavailable(f"the batched group reader did not answer within {bound:.0f} s") from None
        except OSError as error:
            self.close()
            raise ReaderUnavailable(f"the batched group reader stopped: {error.strerror or error}") from error
        if self._process.returncode != 0:
            lines = [line for line in err.splitlines() if line.strip()]
            raise ReaderUnavailable(lines[-1] if lines else f"the reader exited {self._process.returncode}")
        found = {}
        for line in out.splitlines():
            item = json.loads(line)
            found[item["g"]] = GroupRead(_group(item, keep_topic), _offsets(item))
        if len(found) != len(group_ids):
            raise ReaderUnavailable(
                f"the batched group reader answered {len(found)} of {len(group_ids)} groups"
            )
        return found

    def close(self) -> None:
        """Stop the JVM (a pass that ends early, or aborts, leaves none running)."""
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait(10)


def _failed(item: dict[str, Any], code_field: str, message_field: str) -> GroupReadFailed:
    code = item[code_field]
    return GroupReadFailed(ReaderErrorCode(code, f"{code}: {item[message_field]}"))


def _offsets(item: dict[str, Any]) -> list[OffsetRow] | GroupReadFailed:
    return _failed(item, "oe", "om") if "oe" in item else item["o"]


def _group(item: dict[str, Any], keep_topic: Callable[[str], bool]) -> Group | GroupReadFailed:
    """The description as :class:`Group`, with the values the per-group route (kafka_snapshot) stores."""
    if "de" in item:
        return _failed(item, "de", "dm")
    d = item["d"]
    members = []
    for position, (member_id, instance_id, client_id, host, assigned, target) in enumerate(d["members"]):
        assignment = sorted((t, p) for t, p in assigned if keep_topic(t))
        topics = sorted({t for t, _ in assignment} | {t for t in target if keep_topic(t)})
        members.append(
            GroupMemberSnapshot(
                member_id=member_id,
                client_id=client_id,
                host=host,
                group_instance_id=instance_id or None,
                subscribed_topics=tuple(topics),
                assignment=tuple(assignment),
                position=position,
            )
        )
    coordinator = d["coordinator"]
    return Group(
        group_id=item["g"],
        state=_STATE_NAMES.get(d["state"], d["state"].lower()),
        group_type="simple" if d["simple"] else d["type"].lower(),
        assignor=d["assignor"] or None,
        coordinator_id=coordinator[0] if coordinator else None,
        coordinator_host=coordinator[1] if coordinator else None,
        members=tuple(members),
    )


def start(client_config: dict[str, Any], timeout_s: float) -> BatchedGroupReader:
    """Start the reader's JVM and hand it the client configuration (it connects meanwhile)."""
    try:
        config = java_config(client_config, timeout_s)
        command = kafka_jars.group_reader_command(MODE, JVM_OPTIONS)
    except (ShareGroupsUnavailable, kafka_jars.KafkaJarsError) as error:
        raise ReaderUnavailable(str(error)) from None
    try:
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, encoding="utf-8", start_new_session=True,
        )  # fmt: skip
        assert process.stdin is not None
        process.stdin.write(json.dumps(config) + "\n")
        process.stdin.flush()
    except OSError as error:
        raise ReaderUnavailable(
            f"the batched group reader could not start: {error.strerror or error}"
        ) from error
    return BatchedGroupReader(process, timeout_s)
