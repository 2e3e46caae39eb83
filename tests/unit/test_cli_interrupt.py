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
