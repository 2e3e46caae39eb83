"""Why a partition stalled in a torture run: what happened on it in the stall's window.

A stall over budget (torture_liveness.stalls) is explained by a timeline built from the run's
events (plans, pauses, kills, broker restarts and when the coordinators answered again) and the
workers' helper logs (the claim's steps: read, fence, claim; commits that failed or got stuck;
pauses seen by the helper), ending at the partition's first record after the gap. Written to
``stalls.txt`` in the run's directory and summarised in the result (docs/protocol/liveness.md).

Also runs on a kept work directory (``bench/torture.py --keep``)::

    .venv/bin/python -m tests.support.torture_stalls /tmp/rebalance-advisor-torture-XXXX/fenced-combined
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.torture_liveness import Stall

if TYPE_CHECKING:
    from tests.support.torture import Events

#: helper log lines kept for the owners' runs even when they name no partition
_RUN_LINES = re.compile(
    r"since the last call|epoch \d+ -> \d+|self-pause|dying in a transaction|worker failed|"
    r"transactions not ready|replacing|offset readers|is stuck|commit of \S+ failed|closed$"
)
#: how far before the gap's last record the timeline starts, seconds
_LEAD_S = 1.0
#: at most this long before the stall's live stretch (a gap may begin long before, in a restart)
_BEFORE_S = 15.0
#: at most this many helper log lines per stall (the rest are counted)
_MAX_LINES = 60


def _owner(events: Events, partition: int, at: float) -> tuple[int, str | None]:
    epoch, owner = 0, None
    for when, e, plan in events.publishes:
        if when > at:
            break
        epoch = e
        owner = next((m for m, parts in plan.items() if partition in parts), None)
    return epoch, owner


def explain(stall: Stall, topic: str, events: Events, logs: dict[str, str]) -> list[str]:
    """The stall's timeline: one line per event, times relative to the stall's live start."""
    p, hi = stall.partition, stall.next + 0.1
    lo = max(stall.last, stall.start - _BEFORE_S) - _LEAD_S
    found: list[tuple[float, str]] = []
    epoch, owner = _owner(events, p, stall.last)
    owners = {owner} if owner else set()
    found.append((stall.last, f"last record; plan epoch {epoch} gives it to {owner}"))
    for when, e, plan in events.publishes:
        if stall.last < when <= hi:
            now = next((m for m, parts in plan.items() if p in parts), None)
            owners.add(now)
            found.append((when, f"plan epoch {e} gives it to {now}"))
    for start, end, member, kind in events.pauses:
        if member in owners and start <= hi and end >= lo:
            found.append((start, f"{member} stopped ({kind}) for {end - start:.1f} s, until {end:.2f}"))
    inside = {tuple(k) for k in events.kills_in_transaction}
    for kill in events.kills:
        if kill[1] in owners and lo <= kill[0] <= hi:
            how = "inside a transaction" if tuple(kill) in inside else "plainly"
            found.append((kill[0], f"{kill[1]} killed {how} (run {kill[2]})"))
    for start, answered in events.broker_restarts:
        if start <= hi and answered >= lo - 30:
            found.append((start, f"broker restart; group coordinator answered again at {answered:.2f}"))
    for start, answered in events.coordinators.get(str(p), []):
        if start <= hi and answered >= lo - 30:
            found.append((answered, f"transaction coordinator of partition {p} answered again"))
    found += _log_lines(p, topic, owners, lo, hi, logs)
    found.append((stall.next, "first record after the gap"))
    found.sort(key=lambda item: item[0])
    head = (
        f"partition {p}: {stall.length:.1f} s unprocessed with a live owner from {stall.start:.2f} "
        f"(records at {stall.last:.2f} and {stall.next:.2f})"
    )
    return [head] + [f"  {at - stall.start:+7.2f} {at:.2f} {text}" for at, text in found]


def _log_lines(
    p: int, topic: str, owners: set, lo: float, hi: float, logs: dict[str, str], cap: bool = True
) -> list[tuple[float, str]]:
    """The helper log lines of the window that name the partition, or come from an owner's run."""
    names = re.compile(rf"{re.escape(topic)}-{p}(?!\d)")
    stamp = re.compile(r"^(\d+\.\d+) (\w+) (.*)$")
    kept: list[tuple[float, str]] = []
    for run, text in sorted(logs.items()):
        member = run.split(".")[0]
        for line in text.splitlines():
            found = stamp.match(line)
            if not found or not lo <= float(found.group(1)) <= hi:
                continue
            message = found.group(3)
            own = member in owners and not message.startswith("producer:") and _RUN_LINES.search(message)
            if names.search(message) or own:
                kept.append((float(found.group(1)), f"[{run}] {message[:240]}"))
    if cap and len(kept) > _MAX_LINES:
        kept.sort(key=lambda item: item[0])
        left = len(kept) - _MAX_LINES
        kept = kept[:_MAX_LINES] + [(kept[_MAX_LINES][0], f"... {left} more log lines")]
    return kept


def causes(stall: Stall, topic: str, events: Events, logs: dict[str, str]) -> list[str]:
    """What the timeline shows inside the stall's live stretch, as short tags (the summary).

    ``owner commit stuck`` / ``owner commit timed out``: a commit of an owner's run did not return
    within its bound, or timed out in librdkafka (the member's caller's thread waits for its
    commits: it applies no epoch and starts no claim meanwhile); ``takeover``: a claim waited for
    the takeover timeout; ``fence dropped``: a claim fenced and was dropped for a newer epoch;
    ``slow fence``: a fence took over a second; ``N owners``: the plans moved the partition
    between N members; ``after broker restart``: it began within 15 s of one.
    """
    lo, hi = stall.start, stall.start + stall.length + 0.2
    owners = {_owner(events, stall.partition, lo)[1]}
    owners |= {
        next((m for m, parts in plan.items() if stall.partition in parts), None)
        for when, _, plan in events.publishes
        if lo < when <= hi
    }
    tags = []
    text = "\n".join(line for _, line in _log_lines(stall.partition, topic, owners, lo, hi, logs, cap=False))
    patterns = {
        "owner commit stuck": r"\] \w+: commit of \S+ is stuck",
        "owner commit timed out": r"\] \w+: commit of \S+ failed .*Timed out",
        "takeover": r"taking over",
        "fence dropped": r"dropped after its fence",
        "slow fence": r"fence of \S+ by a claim at epoch \d+: producer \[\d+, \d+\] \((?:[1-9]|\d\d+)\.",
        "cannot fence or read": r"cannot fence|cannot check|claim failed",
    }
    tags += [tag for tag, pattern in patterns.items() if re.search(pattern, text)]
    if len(owners - {None}) > 1:
        tags.append(f"{len(owners - {None})} owners")
    if any(answered <= lo <= answered + 15 for _, answered in events.broker_restarts):
        tags.append("after broker restart")
    return tags


def write(path: Path, explained: list[list[str]]) -> None:
    path.write_text("\n\n".join("\n".join(lines) for lines in explained) + "\n")


# -- offline: a kept work directory ----------------------------------------------------------------


def _load(run_dir: Path) -> tuple[Events, dict[str, str], str, dict[int, list[float]]]:
    from tests.support.torture import Events

    raw = json.loads((run_dir / "events.json").read_text())
    events = Events(**{k: v for k, v in raw.items() if k in Events.__dataclass_fields__})
    logs = {path.name[: -len(".log")]: path.read_text() for path in sorted(run_dir.glob("*.processed.log"))}
    processed: dict[int, list[float]] = {}
    topic = ""
    for path in sorted(run_dir.glob("*.processed")):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 9:
                topic = parts[4]
                processed.setdefault(int(parts[5]), []).append(float(parts[0]))
    return events, logs, topic, processed


def main(argv: list[str]) -> int:
    """Explain the stalls over budget of a kept run directory (takeover timeout 3 s, warm-up 10 s)."""
    from tests.support import torture_liveness as live

    if len(argv) != 1 or not (Path(argv[0]) / "events.json").exists():
        print("usage: python -m tests.support.torture_stalls RUN_DIR (a directory with events.json)")
        return 2
    run_dir = Path(argv[0])
    events, logs, topic, processed = _load(run_dir)
    runs = [live.parse_run(name, name.split(".")[0], text, topic, 1e12) for name, text in logs.items()]
    kills = [tuple(k) for k in events.kills]
    down = live.member_downtime(runs, [tuple(x) for x in events.pauses], kills, 1e12)
    every, per_partition = live.broker_downtime(events.broker_restarts, events.coordinators)
    liveness = live.Liveness([tuple(x) for x in events.publishes], down, every, per_partition)
    end = max(max(times) for times in processed.values())  # records were produced until the end
    unfinished = {p: end for p, times in processed.items() if end - max(times) > 8.0}
    result = live.stalls(processed, liveness, events.publishes[0][0] + 10.0, 8.0, unfinished)
    windows = result.pop("stall_windows")
    print(json.dumps(result, indent=1))
    for stall in windows:
        print(", ".join(causes(stall, topic, events, logs)))
        print("\n".join(explain(stall, topic, events, logs)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
