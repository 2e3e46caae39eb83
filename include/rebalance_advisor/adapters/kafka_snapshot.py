"""One consistent pass over a Kafka cluster: every consumer group, its members and committed offsets,
and the log-start/log-end offsets of every partition those groups touch.

Everything is batched through confluent-kafka's AdminClient: one ListGroups, one DescribeGroups call
for all groups, the per-group OffsetFetch calls all in flight together (librdkafka takes one group per
call) while the cluster metadata is read in a thread, then earliest and latest ListOffsets over every
partition, in chunks of LIST_OFFSETS_CHUNK partitions, all in flight together. Log offsets are
asked for only once every committed offset is in, as Kafka's own tool does, so a log-end offset is
never older than the committed offsets it is compared with (lag is not understated while consumers
commit); overlapping them with the group requests measured no clear gain anyway, the client's and
broker's CPU being the limit on a small machine. Every call has a timeout. The result is an
in-memory :class:`~rebalance_advisor.domain.snapshot_model.Snapshot`; writing it is ``rebalance_advisor.store``'s job.

Failure policy: a fault that means "the cluster is not answering" (transport, timeout, all brokers
down) aborts the whole pass with :class:`SnapshotAborted`, so nothing partial lands. A fault that
belongs to one group or topic (not authorized, group gone, topic deleted) is recorded in
``Snapshot.errors`` and the rest of the snapshot still lands.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rebalance_advisor_client.key_ranges import parse_range_group

from rebalance_advisor.adapters import LIBRDKAFKA_LOG, batched_groups
from rebalance_advisor.adapters.client_telemetry import TOPIC as TELEMETRY_TOPIC
from rebalance_advisor.adapters.client_telemetry import read_telemetry
from rebalance_advisor.adapters.kafka_acls import is_authorization_error, missing_acl
from rebalance_advisor.adapters.record_timestamps import read_record_timestamps
from rebalance_advisor.adapters.share_groups import ShareGroupReader, ShareGroupsRead
from rebalance_advisor.domain.parameters import id_with_nul
from rebalance_advisor.domain.safe_regex import SafeRegex, compile_safe_regex
from rebalance_advisor.domain.snapshot_model import (
    CommittedOffset,
    Group,
    GroupMemberSnapshot,
    PartitionOffsets,
    Snapshot,
    SnapshotError,
)
from rebalance_advisor.errors import AdvisorError, InfrastructureUnavailable
from rebalance_advisor.gcpause import gc_paused
from rebalance_advisor.store.id_limits import refused

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_CONNECTIONS = 1
#: From this many groups on, groups are described and their committed offsets read by Kafka's Java
#: AdminClient, many groups per request (adapters/batched_groups.py); below it, librdkafka's calls per
#: group cost less than a JVM's start. Measured with bench/snapshot.py (docs/concepts/snapshots.md,
#: "Fleet scale").
BATCHED_MIN_GROUPS = 2000
#: Partitions per ListOffsets call. librdkafka's work per call grows with the square of its
#: partition count (matching each answer to its request is a linear search, strcmp on the topic),
#: so big lists are split; each chunk is still one request per leader, all in flight together.
#: Earliest+latest of 19,000 partitions alone, client CPU per chunk size: 4,000: 0.77 s,
#: 1,000: 0.31 s, 500: 0.21 s, 250: 0.18-0.20 s, 150: 0.16 s, 100: 0.16 s, 50: 0.19 s (more
#: requests); in whole passes 100 and 200 used the least CPU, 500 ~10% more.
LIST_OFFSETS_CHUNK = 200
#: Use one future per ListOffsets call (see ``_list_offsets``); False forces the public method.
RAW_LIST_OFFSETS = True

#: A listed group described as dead: deleted between the listing and the describe.
DELETED_MEANWHILE = "group was deleted during the snapshot"

#: Error codes that mean the cluster (not one group) is unreachable: the pass is aborted.
_FATAL_CODE_NAMES = (
    "_TRANSPORT",
    "_TIMED_OUT",
    "_TIMED_OUT_QUEUE",
    "_ALL_BROKERS_DOWN",
    "_RESOLVE",
    "_DESTROY",
    "_AUTHENTICATION",
    "_SSL",
    "NETWORK_EXCEPTION",
    "REQUEST_TIMED_OUT",
    "SASL_AUTHENTICATION_FAILED",
)


class SnapshotAborted(InfrastructureUnavailable):
    """The cluster stopped answering (or never did): no snapshot was taken."""


class NoGroupMatched(AdvisorError):
    """The group filter matched none of the cluster's groups: nothing to store.

    An empty snapshot would be "complete" and become the latest, hiding the last useful one from the
    planner, ``lag`` and the UI; so none is taken and the caller says why.
    """

    def __init__(self, groups: GroupFilter, listed: int) -> None:
        parts = [f"--groups {groups.include.pattern!r}" if groups.include else None,
                 f"--exclude-groups {groups.exclude.pattern!r}" if groups.exclude else None]  # fmt: skip
        super().__init__(
            f"no consumer group matches {' and '.join(p for p in parts if p)} (the cluster lists {listed}): "
            "nothing was stored, the latest snapshot stays as it was"
        )


# ---------------------------------------------------------------------------------------- options


@dataclass(frozen=True)
class GroupFilter:
    """Include/exclude regexes over group ids (full match, as Kafka's Java tools use ``matches()``),
    on the linear-time engine of :mod:`rebalance_advisor.domain.safe_regex`."""

    include: SafeRegex | None = None
    exclude: SafeRegex | None = None

    @classmethod
    def parse(cls, include: str | None = None, exclude: str | None = None) -> GroupFilter:
        return cls(
            compile_safe_regex(include, "--groups") if include else None,
            compile_safe_regex(exclude, "--exclude-groups") if exclude else None,
        )

    @property
    def active(self) -> bool:
        return self.include is not None or self.exclude is not None

    def accepts(self, group_id: str) -> bool:
        """A derived key-range group (``<parent>.keyrange.<lo>-<hi>``) is judged by its parent's id:
        the snapshot folds it into the parent, whose lag it is (domain/key_range_groups.py)."""
        parsed = parse_range_group(group_id)
        if parsed is not None:
            group_id = parsed[0]
        if self.include is not None and not self.include.fullmatch(group_id):
            return False
        return not (self.exclude is not None and self.exclude.fullmatch(group_id))


#: Kafka's own topics when the broker cannot be asked (``Topic.INTERNAL_TOPICS`` in Kafka 4.x).
KNOWN_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


@dataclass(frozen=True)
class SnapshotOptions:
    groups: GroupFilter = field(default_factory=GroupFilter)
    include_internal_topics: bool = False
    #: also fetch read_committed end offsets (the last stable offset) for transactional topics;
    #: lags are then measured against them
    read_committed: bool = False
    #: read the timestamp of the record at each lagging committed offset (the time lag's source)
    time_lag: bool = True
    timeout_s: float = DEFAULT_TIMEOUT_S
    #: admin clients (connections) the requests are spread over. A broker answers one connection's
    #: requests one at a time, so more can help a slow broker; measured on one local broker with
    #: 500 groups/19,000 partitions, 1 was as fast as 2, 4 or 8 (client CPU is the limit there).
    connections: int = DEFAULT_CONNECTIONS
    #: also read share groups (KIP-932) through Kafka's Java AdminClient (adapters/share_groups.py)
    share_groups: bool = True
    #: from this many groups on, describe groups and read their offsets batched
    #: (adapters/batched_groups.py); 0: always, None: never (librdkafka's per-group calls)
    batched_min_groups: int | None = BATCHED_MIN_GROUPS
    #: the broker plugin's client-telemetry topic (docs/operations/telemetry.md); None: not read
    telemetry_topic: str | None = TELEMETRY_TOPIC


def decode_properties(data: bytes) -> str:
    """A ``.properties`` file's text: UTF-8 when it decodes as such, else ISO-8859-1, the encoding
    Java's ``Properties.load(InputStream)`` reads (every byte is a character there, so never fails)."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("iso-8859-1")


def read_client_config(path: str | Path) -> dict[str, str]:
    """A librdkafka ``.properties`` file (``key=value`` lines, ``#`` comments) as a dict."""
    path = Path(path)
    try:
        raw_bytes = path.read_bytes()
    except OSError as error:
        raise AdvisorError(f"cannot read client config {path}: {error.strerror or error}") from error
    text = decode_properties(raw_bytes)
    if "\0" in text:
        raise AdvisorError(f"client config {path} contains a NUL byte: is it a binary file?")
    config: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise AdvisorError(f"{path}:{number}: expected key=value, got {raw.strip()!r}")
        config[key.strip()] = value.strip()
    return config


# ------------------------------------------------------------------------------------- collection


def _error_parts(error: BaseException) -> tuple[str | None, str, bool]:
    """(code name, readable reason, fatal?) for anything a future may raise."""
    kafka_error = error.args[0] if error.args else None
    if hasattr(kafka_error, "name") and hasattr(kafka_error, "str"):
        name = kafka_error.name()
        return name, f"{name}: {kafka_error.str()}", name in _FATAL_CODE_NAMES
    if isinstance(error, TimeoutError):
        return "_TIMED_OUT", "timed out waiting for the broker", True
    return None, f"{type(error).__name__}: {error}", False


class ConnectionErrors:
    """librdkafka's ``error_cb``: keeps the client's connection errors, which say *why* a cluster did
    not answer (refused, unknown host, handshake) where the failed request only says "timed out"."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def __call__(self, error: Any) -> None:
        if len(self.seen) < 100:
            self.seen.append((error.name(), error.str()))

    def diagnosis(self) -> str | None:
        """Why the brokers could not be reached, for people; None when nothing was reported."""
        names = {name for name, _ in self.seen}
        text = " ".join(message for _, message in self.seen)
        if "_RESOLVE" in names or "Failed to resolve" in text:
            return "unknown host: the broker address does not resolve (a typo, or DNS)"
        if "Connection refused" in text:
            return "connection refused: nothing listens at that address (wrong port, or the broker is down)"
        if "Invalid response size" in text:
            return "not a Kafka listener: the address answered in another protocol (HTTP, TLS?)"
        if names & {"_SSL", "_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED"}:
            detail = next(
                m for n, m in self.seen if n in {"_SSL", "_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED"}
            )
            return f"security handshake failed: {detail}"
        if "timed out" in text or "_TIMED_OUT" in names:
            return "timed out: the address answered nothing (a firewall, a wrong address, or an overloaded broker)"
        return None


class _Collector:
    """Holds the admin clients, options and deadline-bound helpers for one pass."""

    def __init__(
        self,
        admins: list[Any],
        bootstrap: str,
        options: SnapshotOptions,
        connection_errors: ConnectionErrors | None = None,
    ) -> None:
        self.admins = admins
        self.admin = admins[0]
        self.bootstrap = bootstrap
        self.options = options
        self.timeout = options.timeout_s
        self.errors: list[SnapshotError] = []
        self.connection_errors = connection_errors or ConnectionErrors()

    def abort(self, stage: str, reason: str) -> SnapshotAborted:
        for admin in self.admins:  # serve pending error callbacks (the diagnosis)
            admin.poll(0)
        diagnosis = self.connection_errors.diagnosis()
        if diagnosis is None and ("_TIMED_OUT" in reason or "timed out" in reason):
            diagnosis = "timed out: no answer (a firewall, a wrong address, or an overloaded broker)"
        why = f"{diagnosis} ({reason})" if diagnosis else reason
        return SnapshotAborted(
            f"snapshot of {self.bootstrap} aborted while {stage}: {why}. Nothing was stored; "
            "check that the brokers are up and reachable (and the client config, e.g. security settings)."
        )

    def result(self, future: Any, stage: str) -> Any:
        """The future's value; fatal errors abort, others are re-raised for the caller to record."""
        try:
            return future.result(timeout=self.timeout + 5)
        except Exception as error:
            _, reason, fatal = _error_parts(error)
            if fatal:
                raise self.abort(stage, reason) from error
            raise

    def wait_all(self, futures: Iterable[Any], stage: str) -> None:
        """Wait for many futures under one deadline (cheaper than a timed wait on each)."""
        _, not_done = concurrent.futures.wait(list(futures), timeout=self.timeout + 5)
        if not_done:
            raise self.abort(stage, f"{len(not_done)} requests unanswered after {self.timeout + 5:.0f} s")

    def record(self, stage: str, error: BaseException, **where: Any) -> None:
        code, reason, _ = _error_parts(error)
        if hint := missing_acl(code, where.get("group_id"), where.get("topic")):
            reason = f"{reason} ({hint})"
        self.errors.append(SnapshotError(stage=stage, reason=reason, error_code=code, **where))

    def list_groups(self, on_listed: Callable[[int], None] = lambda _count: None) -> list[str]:
        """The group ids the filter keeps, sorted; ``on_listed`` hears how many the cluster listed
        before the filter runs (regex matching costs about 15 us a group: 1 s at 65,000)."""
        from confluent_kafka import ConsumerGroupType

        types = {ConsumerGroupType.CLASSIC, ConsumerGroupType.CONSUMER}
        try:
            listing = self.result(
                self.admin.list_consumer_groups(request_timeout=self.timeout, types=types), "listing groups"
            )
        except SnapshotAborted:
            raise
        except Exception as error:
            code, reason, _ = _error_parts(error)
            if code not in ("UNSUPPORTED_VERSION", "_UNSUPPORTED_FEATURE", "INVALID_REQUEST"):
                raise self.abort("listing groups", reason) from error
            # Brokers before KIP-848 cannot filter by type: list everything.
            listing = self.result(
                self.admin.list_consumer_groups(request_timeout=self.timeout), "listing groups"
            )
        if listing.errors:
            # A broker that did not answer ListGroups leaves the picture incomplete: not consistent.
            raise self.abort("listing groups", "; ".join(str(e) for e in listing.errors))
        on_listed(len(listing.valid))
        # a set: two ids that differ only after a NUL are listed as one (librdkafka cuts them there)
        kept = sorted({g.group_id for g in listing.valid if self.options.groups.accepts(g.group_id)})
        if not kept and self.options.groups.active:
            raise NoGroupMatched(self.options.groups, len(listing.valid))
        return kept

    def describe(self, group_ids: list[str]) -> dict[str, Any]:
        """DescribeGroups for all groups, split evenly over the admin clients."""
        futures: dict[str, Any] = {}
        for admin, chunk in zip(self.admins, _split(group_ids, len(self.admins)), strict=False):
            if chunk:
                futures.update(admin.describe_consumer_groups(chunk, request_timeout=self.timeout))
        return futures

    def offsets(self, group_ids: list[str]) -> dict[str, Any]:
        """One OffsetFetch per group (librdkafka takes one group per call), all in flight together."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        futures: dict[str, Any] = {}
        admins = self.admins
        for i, group_id in enumerate(group_ids):
            futures.update(
                admins[i % len(admins)].list_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(group_id)], request_timeout=self.timeout
                )
            )
        return futures

    def metadata(self) -> Any:
        try:
            return self.admin.list_topics(timeout=self.timeout)
        except Exception as error:
            _, reason, _ = _error_parts(error)
            raise self.abort("reading cluster metadata", reason) from error

    def unlisted_topics(self, topics: set[str]) -> dict[str, BaseException]:
        """Why each topic a group names is missing from the cluster's metadata, when it is not simply gone.

        The broker leaves a topic the principal may not Describe out of the metadata listing without
        a word; asked by name, it answers TOPIC_AUTHORIZATION_FAILED (also for a missing topic: without
        the grant it does not say whether the topic exists). Those errors are returned here, so the
        snapshot is partial with the ACL named instead of calling the topic deleted.
        """
        from confluent_kafka import TopicCollection

        if not topics:
            return {}
        try:
            futures = self.admin.describe_topics(
                TopicCollection(sorted(topics)), request_timeout=self.timeout
            )
        except Exception:  # noqa: BLE001 - no answer: the caller's "does not exist" stands
            return {}
        found: dict[str, BaseException] = {}
        for topic, future in futures.items():
            try:
                future.result(timeout=self.timeout + 5)
            except Exception as error:  # noqa: BLE001 - only authorization refusals are kept
                if is_authorization_error(_error_parts(error)[0]):
                    found[topic] = error
        return found

    def internal_topics(self, metadata: Any) -> frozenset[str]:
        """The topics the broker flags internal (DescribeTopics' ``is_internal``).

        Only names starting with ``__`` are asked about: every internal topic Kafka has carries that
        prefix (a user topic may too, and is then kept), and describing all topics would cost a
        request per thousands of partitions. Without an answer (old broker, no Describe right),
        Kafka's own list of internal topics decides.
        """
        from confluent_kafka import TopicCollection

        candidates = sorted(t for t in metadata.topics if t.startswith("__"))
        if not candidates:
            return frozenset()
        try:
            futures = self.admin.describe_topics(TopicCollection(candidates), request_timeout=self.timeout)
            return frozenset(
                name
                for name, future in futures.items()
                if future.result(timeout=self.timeout + 5).is_internal
            )
        except Exception as error:  # noqa: BLE001 - fall back to Kafka's list, say so in the log
            log.info(
                "describing %d '__' topics failed (%s): using Kafka's internal topic list",
                len(candidates),
                error,
            )
            return frozenset(t for t in candidates if t in KNOWN_INTERNAL_TOPICS)

    def log_offsets(self, wanted: list[tuple[str, int]], specs: list[tuple[Any, Any]]) -> list[dict]:
        """ListOffsets for all partitions under each (spec, isolation) in ``specs``, all in flight at once.

        Returns one {(topic, partition): offset} per spec. Partitions answered with a retriable error
        (no leader or not the leader: a leader election, a topic still being created) are asked again,
        with a growing pause, until the snapshot's time bound (``timeout_s`` from the first request);
        a topic gone from the metadata meanwhile is not waited for. What still fails then is recorded;
        fatal errors abort.
        """
        found_all: list[dict] = [{} for _ in specs]
        if not wanted:
            return found_all
        deadline = time.monotonic() + self.timeout
        wanted = self._with_leaders(wanted, deadline)
        todo: list[list[tuple[str, int]]] = [list(wanted) for _ in specs]
        pause = 0.1
        while True:
            retry = self._list_offsets_once(todo, specs, found_all)
            left = deadline - time.monotonic()
            if not any(retry) or left <= 0:
                break
            log.info(
                "%d partitions not answered yet (%s, a leader election?): asking again in %.1f s",
                sum(len(failed) for failed in retry),
                next(_error_parts(e)[0] for failed in retry for _, e in failed),
                min(pause, left),
            )
            time.sleep(min(pause, left))
            pause = min(pause * 2, 1.0)
            todo = self._still_wanted(retry)
            retry = [[] for _ in specs]
        for failed in retry:
            for (topic, partition), error in failed:
                self.record("log_offsets", error, topic=topic, partition=partition)
        return found_all

    def _with_leaders(self, wanted: list[tuple[str, int]], deadline: float) -> list[tuple[str, int]]:
        """``wanted`` once the metadata names a leader for each (a growing pause until ``deadline``);
        partitions still without one then are recorded, not asked. Why: librdkafka's ListOffsets,
        asked for partitions whose leader is being elected (a topic just created), was seen to spin
        inside the call on the caller's thread for good (1,200 partitions, librdkafka 2.16.1)."""
        from confluent_kafka import KafkaError

        pause = 0.1
        while True:
            leaderless = self._leaderless(wanted)
            left = deadline - time.monotonic()
            if not leaderless or left <= 0:
                break
            log.info(
                "%d partitions have no leader yet (a leader election?): asking again in %.1f s",
                len(leaderless), min(pause, left),
            )  # fmt: skip
            time.sleep(min(pause, left))
            pause = min(pause * 2, 1.0)
        for topic, partition in leaderless:
            error = _kafka_exception(KafkaError(KafkaError.LEADER_NOT_AVAILABLE, "no leader elected in time"))
            self.record("log_offsets", error, topic=topic, partition=partition)
        missing = set(leaderless)
        return [tp for tp in wanted if tp not in missing]

    def _leaderless(self, wanted: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """Partitions of ``wanted`` the cluster's metadata gives no leader (a deleted topic's are
        left to ListOffsets, which says so); none when the metadata cannot be read."""
        try:
            topics = self.admin.list_topics(timeout=min(self.timeout, 5.0)).topics
        except Exception:  # noqa: BLE001 - no metadata now: ListOffsets answers for itself
            return []
        out = []
        for topic, partition in wanted:
            meta = topics.get(topic)
            if meta is None:
                continue
            found = meta.partitions.get(partition)
            if found is None or found.leader < 0:
                out.append((topic, partition))
        return out

    def _still_wanted(
        self, retry: list[list[tuple[tuple[str, int], BaseException]]]
    ) -> list[list[tuple[str, int]]]:
        """The partitions to ask again (per spec): those of a topic deleted meanwhile are recorded instead."""
        gone = self._deleted_topics({t for failed in retry for (t, _), _ in failed})
        todo = []
        for failed in retry:
            keep = []
            for (topic, partition), error in failed:
                if topic in gone:
                    self.record("log_offsets", error, topic=topic, partition=partition)
                else:
                    keep.append((topic, partition))
            todo.append(keep)
        return todo

    def _deleted_topics(self, topics: set[str]) -> set[str]:
        """Which of ``topics`` the cluster's metadata no longer has."""
        try:
            metadata = self.admin.list_topics(timeout=min(self.timeout, 5.0))
        except Exception:  # noqa: BLE001 - no fresh metadata: keep retrying until the bound
            return set()
        return {t for t in topics if t not in metadata.topics}

    def _request_offsets(
        self, todo: list[list[tuple[str, int]]], specs: list[tuple[Any, Any]]
    ) -> list[list[tuple[list[tuple[str, int]], Any]]]:
        """Per spec, (chunk, future) of ListOffsets calls of LIST_OFFSETS_CHUNK partitions, spread over the admins."""
        requested: list[list[tuple[list[tuple[str, int]], Any]]] = []
        calls = 0
        for (spec, isolation), wanted in zip(specs, todo, strict=True):
            chunks = []
            for start in range(0, len(wanted), LIST_OFFSETS_CHUNK):
                chunk = wanted[start : start + LIST_OFFSETS_CHUNK]
                admin = self.admins[calls % len(self.admins)]
                calls += 1
                chunks.append((chunk, _list_offsets(admin, chunk, spec, isolation, self.timeout)))
            requested.append(chunks)
        return requested

    def _list_offsets_once(
        self, todo: list[list[tuple[str, int]]], specs: list[tuple[Any, Any]], found_all: list[dict]
    ) -> list[list[tuple[tuple[str, int], BaseException]]]:
        """One round of ListOffsets over ``todo`` (per spec); fills ``found_all``, returns the retriable failures."""
        requested = self._request_offsets(todo, specs)
        self.wait_all((f for chunks in requested for _, f in chunks), "listing log offsets")
        retry: list[list[tuple[tuple[str, int], BaseException]]] = []
        for chunks, found in zip(requested, found_all, strict=True):
            failed: list[tuple[tuple[str, int], BaseException]] = []
            for chunk, future in chunks:
                try:
                    results = self.result(future, "listing log offsets")
                except SnapshotAborted:
                    raise
                except Exception as error:  # the whole call failed: every partition in it did
                    if _retriable(error):
                        failed.extend(((t, p), error) for t, p in chunk)
                        continue
                    for topic, partition in chunk:
                        self.record("log_offsets", error, topic=topic, partition=partition)
                    continue
                for tp, value in results.items():
                    if hasattr(value, "offset"):
                        found[(tp.topic, tp.partition)] = value.offset
                        continue
                    # a KafkaError for this partition (topic deleted, no leader, not the leader, ...)
                    error = value if isinstance(value, BaseException) else _kafka_exception(value)
                    _, reason, fatal = _error_parts(error)
                    if fatal:
                        raise self.abort("listing log offsets", reason) from error
                    if _retriable(error):
                        failed.append(((tp.topic, tp.partition), error))
                    else:
                        self.record("log_offsets", error, topic=tp.topic, partition=tp.partition)
            retry.append(failed)
        return retry


#: Per-partition errors a leader election or a topic being created gives for a while: asked again.
_RETRIABLE_CODE_NAMES = frozenset(
    {
        "NOT_LEADER_FOR_PARTITION",
        "LEADER_NOT_AVAILABLE",
        "UNKNOWN_TOPIC_OR_PART",
        "REPLICA_NOT_AVAILABLE",
        "OFFSET_NOT_AVAILABLE",
        "UNKNOWN_LEADER_EPOCH",
        "FENCED_LEADER_EPOCH",
        "NOT_ENOUGH_REPLICAS",
    }
)


def _retriable(error: BaseException) -> bool:
    code, _, _ = _error_parts(error)
    return code in _RETRIABLE_CODE_NAMES


def _raw_list_offsets() -> Callable[..., None] | None:
    """confluent-kafka's C-level ListOffsets call, if this version has it where 2.16 does."""
    try:
        from confluent_kafka.admin import _AdminClientImpl
    except ImportError:
        return None
    return getattr(_AdminClientImpl, "list_offsets", None)


def _kafka_exception(error: Any) -> BaseException:
    from confluent_kafka import KafkaException

    return KafkaException(error)


def _list_offsets(admin: Any, chunk: list[tuple[str, int]], spec: Any, isolation: Any, timeout: float) -> Any:
    """One ListOffsets call; a future of {TopicPartition: ListOffsetsResultInfo or KafkaError}.

    ``AdminClient.list_offsets`` wraps the C call to hand out one ``Future`` per partition, and at
    40,000 partitions creating and waiting on those costs more than the requests themselves. The
    C call underneath (confluent-kafka's ``_AdminClientImpl.list_offsets``) takes one future for the
    whole request; we use it when present, and the public method otherwise.
    """
    from confluent_kafka import TopicPartition

    kwargs: dict[str, Any] = {"request_timeout": timeout}
    raw = _raw_list_offsets() if RAW_LIST_OFFSETS else None
    if raw is None:
        if isolation is not None:
            kwargs["isolation_level"] = isolation
        return _gathered(admin.list_offsets({TopicPartition(t, p): spec for t, p in chunk}, **kwargs))
    if isolation is not None:
        kwargs["isolation_level_value"] = isolation.value
    value = int(spec._value)
    future = concurrent.futures.Future()
    future.set_running_or_notify_cancel()
    raw(admin, [TopicPartition(t, p, value) for t, p in chunk], future, **kwargs)
    return future


def _gathered(per_partition: dict[Any, concurrent.futures.Future]) -> concurrent.futures.Future:
    """One future of {TopicPartition: result or error} done when every per-partition future is."""
    future: concurrent.futures.Future = concurrent.futures.Future()
    future.set_running_or_notify_cancel()
    remaining = [len(per_partition)]
    lock = threading.Lock()

    def gather(_done: Any) -> None:
        with lock:
            remaining[0] -= 1
            if remaining[0]:
                return
        results: dict[Any, Any] = {}
        for tp, f in per_partition.items():
            error = f.exception()
            results[tp] = error if error is not None else f.result()
        future.set_result(results)

    for f in per_partition.values():
        f.add_done_callback(gather)
    return future


def _split(items: list[str], parts: int) -> list[list[str]]:
    """``items`` in ``parts`` contiguous, near-equal chunks."""
    size, extra = divmod(len(items), parts)
    out, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        out.append(items[start:end])
        start = end
    return out


def _group_type(description: Any) -> str:
    if description.is_simple_consumer_group:
        return "simple"
    kind = getattr(description.type, "name", str(description.type)).lower()
    return kind if kind in ("classic", "consumer") else kind or "unknown"


def _members(description: Any, keep_topic: Callable[[str], bool]) -> tuple[GroupMemberSnapshot, ...]:
    members = []
    for position, m in enumerate(description.members):
        assigned = sorted(
            (tp.topic, tp.partition)
            for tp in (m.assignment.topic_partitions if m.assignment else [])
            if keep_topic(tp.topic)
        )
        target = getattr(m, "target_assignment", None)
        target_topics = {tp.topic for tp in (target.topic_partitions if target else [])}
        topics = sorted({t for t, _ in assigned} | {t for t in target_topics if keep_topic(t)})
        members.append(
            GroupMemberSnapshot(
                member_id=m.member_id,
                client_id=m.client_id,
                host=m.host,
                group_instance_id=m.group_instance_id or None,
                subscribed_topics=tuple(topics),
                assignment=tuple(assigned),
                position=position,
            )
        )
    return tuple(members)


def collect(
    bootstrap_servers: str,
    client_config: dict[str, str] | None = None,
    options: SnapshotOptions | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> Snapshot:
    """Take one snapshot of ``bootstrap_servers``. ``on_stage(name)`` is called between stages.

    Python's cyclic garbage collector is paused for the pass: at 500 groups/19,000 partitions the
    pass allocates several hundred thousand acyclic objects (results built on our thread and on
    confluent-kafka's result thread), and the collections they triggered were a quarter of the
    pass's CPU time (pausing it: 0.76 s -> 0.54 s wall). The caller's setting is restored.
    """
    with gc_paused():
        return _SnapshotPass(bootstrap_servers, client_config, options or SnapshotOptions(), on_stage).build()


def clean_bootstrap(servers: str) -> str:
    """``HOST:PORT[,...]`` without empty entries (a trailing comma): librdkafka skips them, Java's
    AdminClient (the share-group reader) refuses the whole list. None left is a one-line error."""
    entries = [entry.strip() for entry in servers.split(",") if entry.strip()]
    if not entries:
        raise AdvisorError(f"bootstrap servers {servers!r} name no broker: give HOST:PORT[,HOST:PORT...]")
    return ",".join(entries)


#: librdkafka's bounds for ``socket.timeout.ms`` (CONFIGURATION.md); ``--timeout`` goes beyond them.
SOCKET_TIMEOUT_MS_RANGE = (10, 300_000)


def socket_timeout_ms(timeout_s: float) -> int:
    """``--timeout`` as librdkafka's socket timeout, held inside the range librdkafka accepts: the
    request timeouts (passed per call) still carry the full value."""
    low, high = SOCKET_TIMEOUT_MS_RANGE
    return min(high, max(low, round(timeout_s * 1000)))


class _SnapshotPass:
    """One pass as named steps, in the order :meth:`build` reads; each step ends a stage that
    ``on_stage`` hears of (``listed``, ``requested``, ``described``, ``committed``, ``log_offsets``,
    ``record_timestamps``, ``share_groups``: bench/snapshot.py times them).

    The share groups are read by Kafka's Java AdminClient in a thread from the start; the cluster
    metadata in a thread while every group's describe and offset fetch are in flight together.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        client_config: dict[str, str] | None,
        options: SnapshotOptions,
        on_stage: Callable[[str], None] | None,
    ) -> None:
        self.bootstrap = bootstrap_servers = clean_bootstrap(bootstrap_servers)
        self.options = options
        self.conf: dict[str, Any] = {**(client_config or {}), "bootstrap.servers": bootstrap_servers}
        self.conf.setdefault("socket.timeout.ms", socket_timeout_ms(options.timeout_s))
        connection_errors = ConnectionErrors()
        admins = _admin_clients(self.conf, options.connections, connection_errors)
        self.stage = on_stage or (lambda _name: None)
        self.started = time.monotonic()
        self.share_reader = ShareGroupReader(self.conf, options.timeout_s) if options.share_groups else None
        self.telemetry = _start_telemetry_read(self.conf, options)
        self.c = _Collector(admins, bootstrap_servers, options, connection_errors)
        #: the group filter matched no consumer group (it may still match a share group)
        self.unmatched: NoGroupMatched | None = None
        self.metadata: Any = None
        self.internal: frozenset[str] = frozenset()
        #: the batched group reader, when this pass uses it
        self.reader: batched_groups.BatchedGroupReader | None = None

    def build(self) -> Snapshot:
        try:
            return self._build()
        finally:  # a pass that aborted, or was interrupted, leaves no JVM behind
            if self.reader is not None:
                self.reader.close()
            if self.share_reader is not None:
                self.share_reader.close()

    def _build(self) -> Snapshot:
        group_ids = self.list_groups()
        self.stage("listed")
        requests = self.request_groups(group_ids)
        self.stage("requested")
        groups = self.describe(group_ids, requests)
        self.stage("described")
        groups, committed = self.committed_offsets(group_ids, groups, requests)
        self.stage("committed")
        taken_at, partitions = self.log_offsets(groups, committed)
        self.stage("log_offsets")
        record_timestamps = self.record_timestamps(committed, partitions)
        self.stage("record_timestamps")
        share = self.share_groups()
        self.stage("share_groups")
        heard = self.telemetry.result().samples.values() if self.telemetry is not None else ()
        self.stage("telemetry")
        return Snapshot(
            taken_at=taken_at,
            bootstrap_servers=self.bootstrap,
            cluster_id=self.metadata.cluster_id,
            duration_s=time.monotonic() - self.started,
            groups=groups + share.groups,
            committed=committed + share.committed,
            partitions=partitions,
            errors=self.refuse_nul_ids(self.c.errors, share) + share.errors,
            isolation_level=self.isolation,
            record_timestamps=record_timestamps,
            share_lags=share.lags,
            share_unstarted=share.unstarted,
            telemetry=[s for s in heard if self.options.groups.accepts(s.group)],
        )

    @property
    def isolation(self) -> str:
        return "read_committed" if self.options.read_committed else "read_uncommitted"

    def keep_topic(self, topic: str) -> bool:
        return topic not in self.internal

    def list_groups(self) -> list[str]:
        """The consumer groups the filter keeps (none, without failing, when it may match a share group)."""
        try:
            return self.c.list_groups(on_listed=self._start_reader)
        except NoGroupMatched as no_match:
            if self.share_reader is None:
                raise
            self.unmatched = no_match
            return []

    def request_groups(self, group_ids: list[str]) -> _Requests:
        """Every group's describe and offset fetch in flight (or the batched reader started), the
        cluster metadata read meanwhile."""
        fetched: dict[str, Any] = {}

        def fetch_metadata() -> None:
            try:
                fetched["metadata"] = self.c.metadata()
                internal = self.options.include_internal_topics
                fetched["internal"] = frozenset() if internal else self.c.internal_topics(fetched["metadata"])
            except BaseException as error:  # re-raised in the caller's thread
                fetched["error"] = error

        metadata_thread = threading.Thread(target=fetch_metadata, name="snapshot-metadata", daemon=True)
        metadata_thread.start()
        if self.reader is not None and not self._batched(len(group_ids)):  # the filter kept few groups
            self.reader.close()
            self.reader = None
        requests = _PerGroupRequests(self, group_ids) if self.reader is None else None
        metadata_thread.join()
        if "error" in fetched:
            raise fetched["error"]
        self.metadata, self.internal = fetched["metadata"], fetched["internal"]
        return requests or self._batched_read(group_ids)

    def _batched(self, groups: int) -> bool:
        threshold = self.options.batched_min_groups
        return threshold is not None and groups >= max(threshold, 1)

    def _start_reader(self, listed: int) -> None:
        """Start the batched group reader when the cluster lists many groups: its JVM starts while
        the filter runs and the metadata is read. Without it, per-group calls are made."""
        if not self._batched(listed):
            return
        try:
            self.reader = batched_groups.start(self.conf, self.options.timeout_s)
        except batched_groups.ReaderUnavailable as error:
            log.info("groups read per group (the batched reader cannot run: %s)", error)

    def _batched_read(self, group_ids: list[str]) -> _Requests:
        """The batched reader's answer; when it failed as a whole (logged), per-group requests."""
        assert self.reader is not None
        try:
            return _BatchedRequests(self, self.reader.read(group_ids, self.keep_topic))
        except batched_groups.ReaderUnavailable as error:
            log.warning("the batched group reader failed (%s): reading per group", error)
            return _PerGroupRequests(self, group_ids)

    def describe(self, group_ids: list[str], requests: _Requests) -> list[Group]:
        """The described groups; one that failed or was deleted meanwhile is an error of its own."""
        groups: list[Group] = []
        for group_id in group_ids:
            try:
                group = requests.group(group_id)
            except SnapshotAborted:
                raise
            except Exception as error:
                self.c.record("describe", error, group_id=group_id)
                continue
            if group.state == "dead":
                self.c.errors.append(SnapshotError("describe", DELETED_MEANWHILE, group_id))
                continue
            groups.append(group)
        return groups

    def committed_offsets(
        self, group_ids: list[str], groups: list[Group], requests: _Requests
    ) -> tuple[list[Group], list[CommittedOffset]]:
        """The groups usable for planning (described, offsets read) and their committed offsets."""
        described = {g.group_id for g in groups}
        committed: list[CommittedOffset] = []
        failed: set[str] = set()
        for group_id in group_ids:
            try:
                committed.extend(requests.offsets(group_id))
            except SnapshotAborted:
                raise
            except Exception as error:
                failed.add(group_id)
                if group_id in described:
                    self.c.record("committed_offsets", error, group_id=group_id)
        # A group whose offsets could not be read is not usable for planning: keep only the error.
        if failed:
            groups = [g for g in groups if g.group_id not in failed]
        if group_ids and not groups:
            raise self._no_group_read()
        kept = {g.group_id for g in groups}
        if len(kept) < len(group_ids):
            committed = [o for o in committed if o.group_id in kept]
        return groups, committed

    def committed_of(self, group_id: str, topic_partitions: list[Any]) -> list[CommittedOffset]:
        """One group's committed offsets (internal topics left out, per-partition errors recorded)."""
        committed = []
        for tp in topic_partitions:
            topic = tp.topic
            if topic in self.internal:
                continue
            if tp.error is not None:
                self.c.errors.append(
                    SnapshotError("committed_offsets", str(tp.error), group_id, topic, tp.partition)
                )
                continue
            if tp.offset < 0:  # OFFSET_INVALID: nothing committed for this partition
                continue
            committed.append(
                CommittedOffset(
                    group_id, topic, tp.partition, tp.offset, tp.leader_epoch, tp.metadata or None
                )
            )
        return committed

    def _no_group_read(self) -> AdvisorError:
        """Every group failed: a refusal when each failure was an authorization error, else an outage."""
        errors = self.c.errors
        if errors and all(is_authorization_error(e.error_code) for e in errors):
            return AdvisorError(  # not an outage: retrying will not help, a grant will
                f"snapshot of {self.bootstrap} refused: not authorized to read any group; "
                f"{errors[0].reason}. Nothing was stored."
            )
        return self.c.abort("reading groups", f"every group failed: {errors[0].reason if errors else '?'}")

    def log_offsets(
        self, groups: list[Group], committed: list[CommittedOffset]
    ) -> tuple[datetime, list[PartitionOffsets]]:
        """The snapshot's time and the log offsets of every partition the groups use.

        The time is when the log ends are asked for (the produce rates' Δt between snapshots, and
        "now" for the time lag), not when the pass started. Earliest, latest (and read_committed
        latest) for every partition: all in flight together.
        """
        from confluent_kafka import IsolationLevel
        from confluent_kafka.admin import OffsetSpec

        wanted, leaders = self._partitions_used(groups, committed)
        taken_at = datetime.now(UTC)
        specs: list[tuple[Any, Any]] = [(OffsetSpec.earliest(), None), (OffsetSpec.latest(), None)]
        if self.options.read_committed:
            specs.append((OffsetSpec.latest(), IsolationLevel.READ_COMMITTED))
        earliest, latest, *rest = self.c.log_offsets(wanted, specs)
        stable = rest[0] if rest else {}
        partitions = [
            PartitionOffsets(
                t, p, earliest.get((t, p)), latest.get((t, p)), leaders.get((t, p)), stable.get((t, p))
            )
            for t, p in wanted
        ]
        return taken_at, partitions

    def _partitions_used(
        self, groups: list[Group], committed: list[CommittedOffset]
    ) -> tuple[list[tuple[str, int]], dict[tuple[str, int], int]]:
        """Every partition of every topic a kept group is assigned or has committed on, with its leader;
        a topic missing from the metadata is an error (not authorized, or deleted)."""
        metadata, errors = self.metadata, self.c.errors
        topics = {t for g in groups for m in g.members for t in m.subscribed_topics}
        topics |= {o.topic for o in committed}
        wanted: list[tuple[str, int]] = []
        leaders: dict[tuple[str, int], int] = {}
        unlisted = self.c.unlisted_topics({t for t in topics if t not in metadata.topics})
        for topic in sorted(topics):
            meta = metadata.topics.get(topic)
            if meta is None or meta.error is not None:
                if meta is not None:
                    errors.append(SnapshotError("metadata", str(meta.error), topic=topic))
                elif topic in unlisted:
                    self.c.record("metadata", unlisted[topic], topic=topic)
                else:
                    errors.append(SnapshotError("metadata", "topic does not exist (deleted?)", topic=topic))
                continue
            for partition, pmeta in sorted(meta.partitions.items()):
                wanted.append((topic, partition))
                leaders[(topic, partition)] = pmeta.leader
        return wanted, leaders

    def record_timestamps(
        self, committed: list[CommittedOffset], partitions: list[PartitionOffsets]
    ) -> dict[tuple[str, str, int], int]:
        """The time lag's source, when asked for (adapters/record_timestamps.py)."""
        if not self.options.time_lag:
            return {}
        return read_record_timestamps(
            self.conf, committed, partitions, self.isolation, self.options.timeout_s
        )

    def refuse_nul_ids(self, errors: list[SnapshotError], share: ShareGroupsRead) -> list[SnapshotError]:
        """``errors`` with each group whose id holds NUL (legal in Java) refused by its whole id.

        librdkafka lists such a group cut at the NUL, and the cut id, naming no group, describes as
        deleted meanwhile: that error goes. The whole ids come from the share-group reader's Java
        listing (none without it: ``--no-share-groups``). Refused, not stored: store/id_limits.py."""
        wanted = [g for g in share.nul_group_ids if self.options.groups.accepts(g)]
        cut = {g.split("\x00", 1)[0] for g in wanted}
        kept = [e for e in errors if not (e.reason == DELETED_MEANWHILE and e.group_id in cut)]
        return kept + [refused(g, id_with_nul("group id", g) or "") for g in wanted]

    def share_groups(self) -> ShareGroupsRead:
        """The share groups the filter keeps; the filter matching no group of either kind fails here."""
        share = (
            self.share_reader.result(self.options.groups.accepts, self.keep_topic)
            if self.share_reader
            else ShareGroupsRead()
        )
        if self.unmatched is not None and not share.groups:
            raise self.unmatched
        return share


class _PerGroupRequests:
    """librdkafka's route: one describe and one offset-fetch future per group, all in flight together."""

    def __init__(self, snapshot_pass: _SnapshotPass, group_ids: list[str]) -> None:
        self.p = snapshot_pass
        self.described_f = snapshot_pass.c.describe(group_ids)
        self.offsets_f = snapshot_pass.c.offsets(group_ids)

    def group(self, group_id: str) -> Group:
        d = self.p.c.result(self.described_f[group_id], "describing groups")
        coordinator = d.coordinator
        return Group(
            group_id=group_id,
            state=getattr(d.state, "name", str(d.state)).lower(),
            group_type=_group_type(d),
            assignor=d.partition_assignor or None,
            coordinator_id=getattr(coordinator, "id", None),
            coordinator_host=f"{coordinator.host}:{coordinator.port}" if coordinator else None,
            members=_members(d, self.p.keep_topic),
        )

    def offsets(self, group_id: str) -> list[CommittedOffset]:
        result = self.p.c.result(self.offsets_f[group_id], "fetching committed offsets")
        return self.p.committed_of(group_id, result.topic_partitions)


class _BatchedRequests:
    """The batched reader's answers (adapters/batched_groups.py); a fatal error aborts the pass."""

    def __init__(self, snapshot_pass: _SnapshotPass, reads: dict[str, batched_groups.GroupRead]) -> None:
        self.p = snapshot_pass
        self.reads = reads

    def _checked(self, value: Any, stage: str) -> Any:
        if isinstance(value, BaseException):
            _, reason, fatal = _error_parts(value)
            if fatal:
                raise self.p.c.abort(stage, reason) from value
            raise value
        return value

    def group(self, group_id: str) -> Group:
        return self._checked(self.reads[group_id].group, "describing groups")

    def offsets(self, group_id: str) -> list[CommittedOffset]:
        rows = self._checked(self.reads[group_id].offsets, "fetching committed offsets")
        internal = self.p.internal
        return [
            CommittedOffset(group_id, topic, partition, offset, epoch, metadata or None)
            for topic, partition, offset, epoch, metadata in rows
            if offset >= 0 and topic not in internal
        ]


_Requests = _PerGroupRequests | _BatchedRequests


def _admin_clients(conf: dict[str, Any], connections: int, connection_errors: ConnectionErrors) -> list[Any]:
    """``connections`` admin clients over ``conf``; a bad property is the caller's config error."""
    from confluent_kafka.admin import AdminClient

    try:
        return [
            AdminClient({**conf, "error_cb": connection_errors}, logger=LIBRDKAFKA_LOG)
            for _ in range(max(1, connections))
        ]
    except Exception as error:  # bad property names or values in the client config
        raise AdvisorError(f"invalid Kafka client config: {error}") from error


def _start_telemetry_read(conf: dict[str, Any], options: SnapshotOptions) -> concurrent.futures.Future | None:
    """The telemetry topic read in a thread of its own while the pass runs (it only adds a source:
    a missing topic or an error gives no samples, never a failed snapshot). A daemon thread: an
    interrupted command exits at once instead of waiting out the read (a pool's worker is joined
    at exit: 10 s against a broker that does not answer)."""
    if options.telemetry_topic is None:
        return None
    future: concurrent.futures.Future = concurrent.futures.Future()

    def run() -> None:
        try:
            future.set_result(read_telemetry(conf, options.telemetry_topic, min(options.timeout_s, 10.0)))
        except BaseException as error:  # re-raised by future.result() in the caller's thread
            future.set_exception(error)

    threading.Thread(target=run, name="telemetry-read", daemon=True).start()
    return future
