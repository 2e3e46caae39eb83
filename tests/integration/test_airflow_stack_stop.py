"""``stop_groups``: SIGTERM to every group at once, SIGKILL per group after its own grace."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from rebalance_advisor.devtools.airflow_stack import group_pids, stop_groups

STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(120)"
POLITE = "import time; print('up', flush=True); time.sleep(120)"


def _group(code: str) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert process.stdout.readline() == "up\n"  # its signal handler is in place
    return process


def test_each_group_is_killed_after_its_own_grace_and_named() -> None:
    quick, slow, polite = _group(STUBBORN), _group(STUBBORN), _group(POLITE)
    gone: dict[int, float] = {}
    said: list[str] = []

    def watch() -> None:
        began = time.monotonic()
        while len(gone) < 3 and time.monotonic() - began < 60:
            for p in (quick, slow, polite):
                if p.pid not in gone and p.poll() is not None:  # reaps it, as stop_groups' caller would
                    gone[p.pid] = time.monotonic() - began
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    stopped = stop_groups(
        {quick.pid, slow.pid, polite.pid}, grace=2.0, echo=said.append, graces={quick.pid: 0.3}
    )
    watcher.join()
    assert stopped == {quick.pid, slow.pid, polite.pid}
    assert all(group_pids(p.pid) == [] for p in (quick, slow, polite))
    # SIGTERM ends the polite one at once; the stubborn ones only by SIGKILL, the quick one first
    assert gone[polite.pid] < gone[quick.pid] < gone[slow.pid]
    assert gone[slow.pid] >= 2.0 and gone[quick.pid] < 2.0
    assert len(said) == 2 and str(quick.pid) in said[0] and str(slow.pid) in said[1]
    assert all("after SIGTERM, killed" in line for line in said) and str(polite.pid) not in "".join(said)
