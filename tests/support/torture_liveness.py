"""Liveness of a torture run (tests.support.torture): stalls and fences of rightful owners.

From the workers' helper logs (claims, fences, releases, drops) and the run's events (plans,
pauses, kills, broker restarts):

- a *stall* is time a partition went unprocessed while the newest plan gave it to a member that
  was running (not stopped, not dead or still starting) and the broker was up; the target is at
  most the takeover timeout plus 5 s (docs/protocol/liveness.md);
- a *fence of a rightful owner* is a claim's fence (``init_transactions``) while another run held
  the partition (claimed it, or fenced for a claim not yet written) under a newer epoch than the
  fencing claim's: a stale claim stopped the owner the plan wanted.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

_STAMP = r"^(\d+\.\d+) \w+ (\S+): "
#: sampling step of the stall measure, seconds
_STEP = 0.05


@dataclass(frozen=True)
class Stall:
    """``partition`` went unprocessed from ``last`` to ``next`` (two of its records); ``length``
    seconds of that, from ``start`` on, with a live owner (explained by torture_stalls.py)."""

    partition: int
    last: float
    next: float
    start: float
    length: float


@dataclass(frozen=True)
class Fence:
    at: float
    run: str
    partition: int
    epoch: int
    producer: tuple[int, int] | None = None  # (producer id, producer epoch) the broker gave it


@dataclass(frozen=True)
class Holding:
    """A run held ``partition`` (claimed at ``epoch``) from ``start`` to ``end``."""

    run: str
    partition: int
    epoch: int
    start: float
    end: float
    producer: tuple[int, int] | None = None  # of the fence that began it (None: unfenced)


@dataclass
class RunLog:
    """What one worker run's helper log says about one topic."""

    name: str
    member: str
    ready: float | None  # its first log line: the helper started
    fences: list[Fence]
    holdings: list[Holding]
    #: (time, partition) of each "fenced on" drop: the run's producer was fenced while it held it
    fenced: list[tuple[float, int]] = field(default_factory=list)


def parse_run(name: str, member: str, text: str, topic: str, end: float) -> RunLog:
    """Fences and holdings of one run; a holding still open at its last line ends at ``end``."""
    t = re.escape(topic)
    fence = re.compile(_STAMP + rf"fence of {t}-(\d+) by a claim at epoch (\d+): producer \[(\d+), (\d+)\]")
    claimed = re.compile(_STAMP + rf"claimed {t}-(\d+) at epoch (\d+)")
    released = re.compile(_STAMP + r"released (.*) at epoch")
    failed = re.compile(
        _STAMP + rf"(?:claim transaction of {t}-(\d+) failed|{t}-(\d+) was claimed by|"
        rf"claim of {t}-(\d+) at epoch \d+ dropped|no offsets for {t}-(\d+))"
    )
    lines = text.splitlines()
    stamps = [float(m.group(1)) for m in map(re.compile(_STAMP).match, lines) if m]
    fences, holdings, open_since, fenced = [], [], {}, []
    for line in lines:
        if found := fence.match(line):
            at, p, e = float(found.group(1)), int(found.group(3)), int(found.group(4))
            producer = (int(found.group(5)), int(found.group(6)))
            fences.append(Fence(at, name, p, e, producer))
            open_since[p] = (at, e, producer)
        elif found := claimed.match(line):
            at, p, e = float(found.group(1)), int(found.group(3)), int(found.group(4))
            open_since.setdefault(p, (at, e, None))
        elif found := released.match(line):
            for p in _partitions(found.group(3), topic):
                _close(holdings, open_since, name, p, float(found.group(1)))
        elif (found := failed.match(line)) or (found := _drop(line, topic)):
            p = int(next(g for g in found.groups()[2:] if g is not None))
            _close(holdings, open_since, name, p, float(found.group(1)))
            if found.group(3) is not None and " fenced on " in line:
                fenced.append((float(found.group(1)), p))
    for p in list(open_since):
        _close(holdings, open_since, name, p, end)
    return RunLog(name, member, stamps[0] if stamps else None, fences, holdings, fenced)


def _drop(line: str, topic: str) -> re.Match | None:
    """A line saying the run gave the partition up (fenced, refused, taken, stuck)."""
    t = re.escape(topic)
    return re.match(
        _STAMP + rf"(?:fenced on {t}-(\d+)|not committing {t}-(\d+)|{t}-(\d+) was taken by|"
        rf"\w+ of {t}-(\d+) is stuck)",
        line,
    )


def _partitions(names: str, topic: str) -> list[int]:
    prefix = f"{topic}-"
    return [int(n[len(prefix) :]) for n in names.split(", ") if n.startswith(prefix)]


def _close(holdings: list[Holding], open_since: dict, run: str, p: int, at: float) -> None:
    if p in open_since:
        start, epoch, producer = open_since.pop(p)
        holdings.append(Holding(run, p, epoch, start, at, producer))


def rightful_fences(runs: Iterable[RunLog]) -> list[tuple[Fence, Holding]]:
    """Fences that stopped a run holding the partition under a newer epoch than the fencer's.

    Two processes' log stamps can disagree with the broker's order (a process descheduled between
    its fence and its log line); the producer epochs cannot: a fence that got a lower producer
    epoch of the same producer id than the holder's fence was handled first, and stopped nobody.
    """
    runs = list(runs)
    holdings = [h for r in runs for h in r.holdings]
    found = []
    for run in runs:
        for fence in run.fences:
            for held in holdings:
                if (
                    held.run != fence.run
                    and held.partition == fence.partition
                    and held.start < fence.at <= held.end
                    and held.epoch > fence.epoch
                    and not _fenced_before(fence, held)
                ):
                    found.append((fence, held))
    return found


def _fenced_before(fence: Fence, held: Holding) -> bool:
    """Did the broker handle ``fence`` before the fence that began ``held`` (same producer id)?"""
    if fence.producer is None or held.producer is None or fence.producer[0] != held.producer[0]:
        return False
    return fence.producer[1] < held.producer[1]


@dataclass(frozen=True)
class FencedOwner:
    """``held`` was fenced while every plan since its claim gave its member the partition; by
    ``fencer`` (the logged fence with the next producer epoch), or None: no fence logged it (a
    fence the helper stopped, whose producer's retry landed)."""

    held: Holding
    dropped: float
    fencer: Fence | None


def owners_fenced_while_rightful(
    runs: Iterable[RunLog], publishes: list[tuple[float, int, dict]]
) -> list[FencedOwner]:
    """Holders fenced while the plans never gave the partition away, whoever fenced them.

    :func:`rightful_fences` sees only fences that were logged, with their claim's epoch; this
    one starts from the victim's side ("fenced on"), so a stopped fence whose producer still
    reached the broker counts too (docs/protocol/liveness.md, "Dropped producers").
    """
    runs = list(runs)
    fences = [f for r in runs for f in r.fences if f.producer]
    found = []
    for run in runs:
        for dropped, p in run.fenced:
            held = next((h for h in run.holdings if h.partition == p and h.end == dropped), None)
            if held is None or not _given_throughout(publishes, run.member, p, held.start, dropped):
                continue
            found.append(FencedOwner(held, dropped, _fencer(fences, held, dropped)))
    return found


def _fencer(fences: list[Fence], held: Holding, dropped: float) -> Fence | None:
    """The logged fence with the next producer epoch of the holder's id, if another run's logged it
    by the drop (it logs after its fence returned: a second of slack); the holder's own re-claim
    after its drop is not its fencer."""
    if held.producer is None:
        return None
    pid, epoch = held.producer
    later = [
        f for f in fences if f.partition == held.partition and f.producer[0] == pid and f.producer[1] > epoch
    ]
    fencer = min(later, key=lambda f: f.producer[1], default=None)
    if fencer is None or fencer.at > dropped + 1.0 or fencer.run == held.run:
        return None
    return fencer


def _given_throughout(
    publishes: list[tuple[float, int, dict]], member: str, p: int, a: float, b: float
) -> bool:
    """Did the plan in force at ``a`` and every plan published until ``b`` give ``p`` to ``member``?"""
    times = [at for at, _, _ in publishes]
    first = bisect.bisect_right(times, a) - 1
    if first < 0:
        return False
    last = bisect.bisect_right(times, b)
    return all(p in publishes[i][2].get(member, ()) for i in range(first, last))


def describe_fenced_owner(owner: FencedOwner) -> str:
    held, fencer = owner.held, owner.fencer
    by = (
        f"by {fencer.run} (claim at epoch {fencer.epoch}, {fencer.at:.3f})"
        if fencer
        else "by no logged fence (a stopped fence's producer)"
    )
    return (
        f"partition {held.partition}: {held.run} (claimed at epoch {held.epoch}, {held.start:.3f}) "
        f"fenced {by}, dropped {owner.dropped:.3f}"
    )


def describe(fence: Fence, held: Holding) -> str:
    return (
        f"partition {fence.partition}: {fence.run} fenced at epoch {fence.epoch} ({fence.at:.3f}) "
        f"while {held.run} held it at epoch {held.epoch} (since {held.start:.3f})"
    )


def moved_on_fences(runs: Iterable[RunLog], publishes: list[tuple[float, int, dict]]) -> int:
    """Fences at an epoch older than the newest one published before them."""
    times = [at for at, _, _ in publishes]
    epochs = [epoch for _, epoch, _ in publishes]
    count = 0
    for run in runs:
        for fence in run.fences:
            i = bisect.bisect_right(times, fence.at) - 1
            count += i >= 0 and epochs[i] > fence.epoch
    return count


@dataclass
class Liveness:
    """Inputs of the stall measure: when each member was able to work, and the plans."""

    publishes: list[tuple[float, int, dict]]
    down: dict[str, list[tuple[float, float]]]  # member -> intervals it could not work
    broker_down: list[tuple[float, float]]
    #: partition -> intervals its claim's transaction coordinator had not answered yet (restarts)
    partition_down: dict[int, list[tuple[float, float]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._times = [t for t, _, _ in self.publishes]

    def owner(self, partition: int, at: float) -> str | None:
        i = bisect.bisect_right(self._times, at) - 1
        if i < 0:
            return None
        plan = self.publishes[i][2]
        return next((m for m, parts in plan.items() if partition in parts), None)

    def live(self, partition: int, at: float) -> bool:
        member = self.owner(partition, at)
        if member is None or any(s <= at <= e for s, e in self.broker_down):
            return False
        if any(s <= at <= e for s, e in self.partition_down.get(partition, [])):
            return False
        return not any(s <= at <= e for s, e in self.down.get(member, []))


def member_downtime(
    runs: list[RunLog],
    pauses: list[tuple[float, float, str, str]],
    kills: list[tuple[float, str, str]],
    end: float,
) -> dict[str, list[tuple[float, float]]]:
    """Per member, when it could not work: stopped (SIGSTOP), or killed until its next run started."""
    down: dict[str, list[tuple[float, float]]] = {}
    for start, stop, member, _ in pauses:
        down.setdefault(member, []).append((start, stop))
    by_member: dict[str, list[RunLog]] = {}
    for run in runs:
        by_member.setdefault(run.member, []).append(run)
    for at, member, _ in kills:
        later = [r.ready for r in by_member.get(member, []) if r.ready is not None and r.ready > at]
        down.setdefault(member, []).append((at, min(later, default=end)))
    return down


def stalls(
    processed: dict[int, list[float]],
    liveness: Liveness,
    since: float,
    budget: float,
    unfinished: dict[int, float] | None = None,
) -> dict[str, object]:
    """The longest time each partition went unprocessed with a live owner, between two records.

    ``unfinished``: partitions whose records were not all processed by the end of the run, and
    when that end was: the gap from their last record to it counts too (a partition that never
    resumed has no record after its gap).

    Only gaps of more than a second are sampled (every ``_STEP`` s): the owner must have been live
    at each sample for the time to count, and the count restarts when it was not.
    """
    worst: list[Stall] = []
    for p, times in processed.items():
        times = sorted(t for t in times if t >= since)
        if unfinished and p in unfinished:
            times.append(unfinished[p])
        for a, b in zip(times, times[1:], strict=False):
            if b - a > 1.0:
                longest, start = _longest_live(p, a, b, liveness)
                if longest > 1.0:
                    worst.append(Stall(p, a, b, start, longest))
    worst.sort(key=lambda s: s.length, reverse=True)
    return {
        "stall_max_s": round(worst[0].length, 2) if worst else 0.0,
        "stalls_over_budget": sum(1 for s in worst if s.length > budget),
        "stall_budget_s": budget,
        "stall_examples": [
            f"partition {s.partition}: {s.length:.1f} s unprocessed from {s.start:.3f} (last record "
            f"{s.last:.3f})"
            for s in worst[:5]
        ],
        "stall_windows": [s for s in worst if s.length > budget],  # to explain (torture_stalls.py)
    }


def _longest_live(p: int, a: float, b: float, liveness: Liveness) -> tuple[float, float]:
    """The longest stretch of ``(a, b)`` during which ``p``'s owner was live: (length, start)."""
    longest = current = 0.0
    start = best_start = a
    t = a + _STEP
    while t < b:
        if liveness.live(p, t):
            if current == 0.0:
                start = t - _STEP
            current += _STEP
        else:
            current = 0.0
        if current > longest:
            longest, best_start = current, start
        t += _STEP
    return longest, best_start


def broker_downtime(
    restarts: list, coordinators: dict | None = None
) -> tuple[list[tuple[float, float]], dict[int, list[tuple[float, float]]]]:
    """When the broker counts as restarting: (for every partition, per partition), both measured.

    For every partition: from the restart to the group coordinator's first answer. Per partition
    (fenced): until the transaction coordinator its claims' ``transactional.id`` maps to answered
    a fresh producer (torture.transaction_coordinators_answer). No guessed grace: a client that
    is slower than a fresh one to recover counts as stalled.
    """
    every = [(float(s), float(e)) for s, e in restarts]
    per_partition = {
        int(p): [(float(s), float(e)) for s, e in answers] for p, answers in (coordinators or {}).items()
    }
    return every, per_partition
