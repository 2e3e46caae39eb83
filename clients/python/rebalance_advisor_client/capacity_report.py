"""How fast this member processes records, as the helper measures it and writes it into its commits.

From outside, a consumer's capacity shows only while it is saturated: then what it consumes is what
it can do. A consumer that keeps up shows only its load, so the advisor had to guess how much more
it could take (bench/drain.py cap2x-z1.5: members x2 apart, overloaded 12 % of the time while their
capacities were estimated, 1.4 % when known). The helper sees more. Time spent inside ``poll()`` is
idle; the rest (the application handling the records ``poll()`` returned, and its commits) is busy:
the same split Kafka's Java consumer reports as ``poll-idle-ratio-avg`` (KIP-517). Records handed
out per busy second is the member's capacity at any load:

    capacity = records returned / busy seconds, over the last ``window_s`` seconds.

It is written with the owner mark into each commit's metadata (``"capacity"``, ``"busy"``: the busy
share of the window, ``"at"``: when, in seconds since the epoch), and the snapshot reads it from the
committed offsets it already fetches (``estimates.reported_capacities``). No I/O here.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

#: the key every helper-written commit metadata document carries (handover_rules.OwnerMark)
MARK_KEY = "rebalance_advisor"


@dataclass(frozen=True)
class CapacityReport:
    """A member's own measure of its speed: ``capacity`` records per busy second, ``busy`` the share
    of the window it spent outside ``poll()``, measured at ``at`` (seconds since the epoch)."""

    capacity: float
    busy: float
    at: float

    def fields(self) -> dict[str, float]:
        """The keys added to the owner mark's JSON (rounded: metadata is limited to 4,096 bytes)."""
        return {"capacity": round(self.capacity, 3), "busy": round(self.busy, 4), "at": round(self.at, 3)}


def _positive(value: object) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    )


def mark_document(metadata: str | None) -> dict | None:
    """Commit metadata parsed as a helper-written document (a JSON object with :data:`MARK_KEY`), or
    None: the one parse behind ``handover_rules.decode_mark`` and the report's decoders."""
    if not metadata:
        return None
    try:
        data = json.loads(metadata)
    except ValueError:
        return None
    return data if isinstance(data, dict) and MARK_KEY in data else None


def reported_document(metadata: str | None) -> tuple[dict, CapacityReport] | None:
    """The helper's document and the report in it, parsed once; None without a (valid) report.
    Metadata without the report's key is not parsed at all: most commits carry none."""
    if not metadata or '"capacity"' not in metadata:
        return None
    data = mark_document(metadata)
    if data is None:
        return None
    capacity, busy, at = data.get("capacity"), data.get("busy"), data.get("at")
    if not (_positive(capacity) and _positive(busy) and _positive(at)) or busy > 1:  # type: ignore[operator]
        return None
    return data, CapacityReport(float(capacity), float(busy), float(at))  # type: ignore[arg-type]


def decode_capacity_report(metadata: str | None) -> CapacityReport | None:
    """The report in a commit's metadata, or None (not written by the helper, or without a report)."""
    found = reported_document(metadata)
    return None if found is None else found[1]


class UtilisationMeter:
    """Busy and idle time around ``poll()`` in buckets of ``bucket_s``, over the last ``window_s``.

    ``poll_started()`` and ``poll_ended(records)`` bracket each call; the time between one call's end
    and the next one's start is busy. A report needs ``min_busy_s`` of busy time and ``min_records``
    records in the window: a nearly idle member's few records give a noisy ratio. Thread-safe: marks
    are written on the claim threads too.
    """

    def __init__(
        self,
        window_s: float = 60.0,
        bucket_s: float = 5.0,
        min_busy_s: float = 0.5,
        min_records: int = 20,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.window_s, self.bucket_s = window_s, bucket_s
        self.min_busy_s, self.min_records = min_busy_s, min_records
        self._clock, self._wall_clock = clock, wall_clock
        self._lock = threading.Lock()
        #: [bucket start, busy s, idle s, records], oldest first
        self._buckets: deque[list[float]] = deque()
        self._poll_started: float | None = None
        self._poll_ended: float | None = None

    def _bucket(self, now: float) -> list[float]:
        if not self._buckets or now - self._buckets[-1][0] >= self.bucket_s:
            self._buckets.append([now, 0.0, 0.0, 0.0])
        while self._buckets and now - self._buckets[0][0] > self.window_s + self.bucket_s:
            self._buckets.popleft()
        return self._buckets[-1]

    def poll_started(self) -> None:
        now = self._clock()
        with self._lock:
            if self._poll_ended is not None:
                self._bucket(now)[1] += now - self._poll_ended
            self._poll_started, self._poll_ended = now, None

    def poll_ended(self, records: int) -> None:
        now = self._clock()
        with self._lock:
            if self._poll_started is not None:
                bucket = self._bucket(now)
                bucket[2] += now - self._poll_started
                bucket[3] += records
            self._poll_started, self._poll_ended = None, now

    def report(self) -> CapacityReport | None:
        """Capacity over the window, or None while it holds too little busy time or too few records."""
        now = self._clock()
        with self._lock:
            kept = [b for b in self._buckets if now - b[0] <= self.window_s + self.bucket_s]
            busy = sum(b[1] for b in kept)
            idle = sum(b[2] for b in kept)
            records = sum(b[3] for b in kept)
        if busy < self.min_busy_s or records < self.min_records:
            return None
        return CapacityReport(records / busy, busy / (busy + idle), self._wall_clock())
