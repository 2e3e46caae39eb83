"""The one poll-until-deadline loop (broker start, Airflow stack, runs, process exits).

Why one: the hand-written copies differed in whether they checked once more at the deadline and
how long they slept past it. Here the check always runs at least once, and once after the last
sleep; the caller decides what a timeout means (raise with its own message, or carry on).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll_until(check: Callable[[], T], timeout: float, interval: float) -> T | None:
    """Call ``check()`` every ``interval`` seconds until it returns a truthy value (returned) or
    ``timeout`` seconds have passed (``None``). ``check`` may raise to stop early (a process died)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            return None
        time.sleep(interval)
