"""``rebalance-advisor lag | head``: a reader that goes away ends the command quietly, no traceback."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

from rebalance_advisor import store
from rebalance_advisor.domain.snapshot_model import CommittedOffset, Group, PartitionOffsets, Snapshot

ROWS = 2000


def _stored_snapshot(url: str) -> None:
    """One memberless group with a committed offset on each of ROWS partitions, no broker needed."""
    taken = Snapshot(
        taken_at=datetime.now(UTC),
        bootstrap_servers="127.0.0.1:9",
        cluster_id="pipe-test",
        duration_s=0.1,
        groups=[Group("pipe-group", "empty", "classic", None, 1, "127.0.0.1:9")],
        committed=[CommittedOffset("pipe-group", "pipe-topic", p, 1) for p in range(ROWS)],
        partitions=[PartitionOffsets("pipe-topic", p, 0, 5) for p in range(ROWS)],
    )
    store.upgrade(url)
    store.write_snapshot(taken, url)


def test_lag_into_a_closed_pipe_exits_quietly(sqlite_url: str) -> None:
    _stored_snapshot(sqlite_url)
    process = subprocess.Popen(
        [sys.executable, "-m", "rebalance_advisor.cli", "lag", "--db", sqlite_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    # The reader is gone before the command writes (as `head` is once it has its lines): its first
    # write fails with EPIPE, deterministically.
    process.stdout.close()
    err = process.stderr.read().decode()
    code = process.wait(60)
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err, err
    assert code == 1, (code, err)


def test_lag_into_an_open_pipe_prints_every_row(sqlite_url: str) -> None:
    """The same command read to the end still prints all rows and exits 0 (the fix hides nothing)."""
    _stored_snapshot(sqlite_url)
    done = subprocess.run(
        [sys.executable, "-m", "rebalance_advisor.cli", "lag", "--db", sqlite_url],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().count("pipe-group") == ROWS
