"""Ctrl-C before a command starts (while the CLI imports its command modules or parses) ends it like
Ctrl-C during the command: one line and exit code 130, no traceback."""

from __future__ import annotations

import pytest
from rebalance_advisor import cli


def test_ctrl_c_while_the_commands_are_imported_is_one_line_and_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted_import(name: str):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.importlib, "import_module", interrupted_import)
    assert cli.main(["snapshot", "--help"]) == 130
    out, err = capsys.readouterr()
    assert (out, err) == ("", "rebalance-advisor: interrupted\n")


#: the program as the console script runs it, with a thread the interpreter joins at exit (as it
#: joins a Kafka client's) and a Ctrl-C that lands while it does
LATE_CTRL_C = """
import os, signal, sys, threading, time
from rebalance_advisor import cli
threading.Thread(target=time.sleep, args=(20,), name="joined-at-exit").start()
sys.argv = ["rebalance-advisor", "lag", "--db", sys.argv[1]]
code = cli.console_main()
threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
sys.exit(code)
"""


def test_ctrl_c_while_the_program_exits_is_130_without_a_traceback(tmp_path) -> None:
    """The command has printed its line; a Ctrl-C while the interpreter shuts down used to print a
    KeyboardInterrupt traceback from threading's shutdown and end with -2 (SIGINT)."""
    import subprocess
    import sys
    import time

    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", LATE_CTRL_C, f"sqlite:///{tmp_path / 'missing.db'}"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr, done.stderr
    assert done.stderr.startswith("rebalance-advisor: error:") and done.stderr.count("\n") == 1, done.stderr
    assert time.monotonic() - started < 15  # not after the 20 s thread
