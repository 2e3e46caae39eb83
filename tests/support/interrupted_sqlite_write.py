"""A child process for the Ctrl-C test (tests/integration/test_snapshot_hardening.py): it writes a
large synthetic snapshot to the SQLite URL given, sends itself SIGINT while the biggest bulk insert
runs, and then asks the store, as the snapshot command does, whether anything was stored.

It prints one JSON line: where the interrupt landed (the innermost frame's function) and what the
read after it answered (``stored``: a snapshot id or null) or raised (``error``)."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import traceback

import sqlalchemy as sa
from rebalance_advisor import store

from tests._planner import make_snapshot

PARTITIONS, GROUPS = 1000, 100  # 100,000 committed offsets: an insert that runs for a while


def main(url: str) -> None:
    groups = {
        f"g{i}": {
            "topics": {f"t{i % 10}": [(1000, 500)] * PARTITIONS},
            "members": [(f"m{i}", None, [(f"t{i % 10}", p) for p in range(PARTITIONS)], None)],
        }
        for i in range(GROUPS)
    }
    snapshot = make_snapshot(groups)
    engine = store.engine_for(url)

    def interrupt_soon(_conn, _cursor, _statement, parameters, _context, executemany) -> None:
        if executemany and len(parameters) >= GROUPS * PARTITIONS:
            threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()

    sa.event.listen(engine, "before_cursor_execute", interrupt_soon)
    report: dict = {}
    try:
        report["stored"] = store.write_snapshot(snapshot, url)
    except KeyboardInterrupt as interrupted:
        report["landed_in"] = traceback.extract_tb(interrupted.__traceback__)[-1].name
        try:
            report["stored"] = store.stored_snapshot_after(0, snapshot.bootstrap_servers, url)
        except Exception as error:  # noqa: BLE001 - the test reads what went wrong
            report["error"] = str(error)
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
