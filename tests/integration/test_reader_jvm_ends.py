"""The share-group reader's JVM ends with the snapshot command that started it (docs/concepts/snapshots.md,
"Interrupting a snapshot"): Ctrl-C (SIGINT) and SIGTERM of ``rebalance-advisor snapshot`` while the
reader waits on the cluster leave no JVM running. The JVM runs in a session of its own (the
terminal's Ctrl-C reaches the command only), so nothing stopped it before: it outlived the command
with parent 1 until its own timeout.

The cluster here is an endpoint that accepts connections and never answers (a hung broker), so the
reader is still waiting, at a known place, when the signal comes: with a live broker it finishes
within a second and whether it would have outlived the command cannot be seen.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

#: the reader's mode, as its command line names it (adapters/share_groups.py)
READER = b"share-groups"


@contextlib.contextmanager
def _hung_broker() -> Iterator[int]:
    """A port that accepts connections and never answers; yields the port."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(server.accept()[0])

    threading.Thread(target=accept, name="hung-broker", daemon=True).start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        for sock in [server, *held]:
            sock.close()


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state) of ``pid``, or None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    return int(fields[1]), fields[0]


def _reader_of(parent: int) -> int | None:
    """The pid of the reader's JVM (not its compiler) started by ``parent``, if running."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            stat = _stat(int(entry.name))
            if stat and stat[0] == parent and READER in argv and not argv[0].endswith(b"javac"):
                return int(entry.name)
    return None


def _alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[1] not in ("Z", "X")


@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_the_share_group_reader_ends_with_an_interrupted_snapshot(sent: int, tmp_path: Path) -> None:
    from rebalance_advisor.adapters import kafka_jars

    try:
        kafka_jars.fetch_jars()
    except kafka_jars.KafkaJarsError as exc:
        pytest.skip(f"Kafka jars or Java unavailable: {exc}")
    with _hung_broker() as port:
        command = [sys.executable, "-m", "rebalance_advisor.cli", "snapshot", "--bootstrap-servers",
                   f"127.0.0.1:{port}", "--db", f"sqlite:///{tmp_path / 'a.db'}", "--timeout", "300"]  # fmt: skip
        cli = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        jvm = None
        try:
            deadline = time.monotonic() + 120  # a first run compiles the reader
            while jvm is None and cli.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
                jvm = _reader_of(cli.pid)
            assert jvm is not None, f"no reader JVM seen (the command's exit: {cli.poll()})"
            time.sleep(1.0)  # the JVM is into its main, waiting on the hung broker
            cli.send_signal(sent)
            out, err = cli.communicate(timeout=60)
            assert cli.returncode == (130 if sent == signal.SIGINT else -sent), err
            if sent == signal.SIGINT:
                assert "interrupted before the snapshot was stored" in err, err
            gone_by = time.monotonic() + 5
            while _alive(jvm) and time.monotonic() < gone_by:
                time.sleep(0.1)
            assert not _alive(jvm), f"the reader JVM {jvm} outlived the command: {_stat(jvm)}"
        finally:
            if cli.poll() is None:
                cli.kill()
                cli.wait(10)
            if jvm is not None and _alive(jvm):
                os.kill(jvm, signal.SIGKILL)
