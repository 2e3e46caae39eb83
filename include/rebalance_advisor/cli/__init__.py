"""``rebalance-advisor``: one CLI over the library.

Each subcommand lives in its own module under ``rebalance_advisor.cli`` and exposes
``register(subparsers)``; it sets ``func`` on its parser, which returns the exit code.
Heavy imports happen inside the command functions so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
from typing import NoReturn

from rebalance_advisor import __version__
from rebalance_advisor.errors import AdvisorError

#: the ``--db`` help of every command that reads or writes the advisor database
DB_HELP = "SQLAlchemy URL (default: $REBALANCE_ADVISOR_DB_URL or the SQLite file)"

#: Subcommand modules, in the order ``--help`` lists them.
COMMAND_MODULES = [
    "rebalance_advisor.cli.dev",
    "rebalance_advisor.cli.demo",
    "rebalance_advisor.cli.plan",
    "rebalance_advisor.cli.snapshot",
    "rebalance_advisor.cli.advise",
    "rebalance_advisor.cli.members",
    "rebalance_advisor.cli.plan_status",
    "rebalance_advisor.cli.simulate",
]


class OneLineErrorParser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line ending in a hint, not the whole usage block
    (subcommand parsers inherit the class: ``add_subparsers`` uses the parent's)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="rebalance-advisor",
        description="Snapshot Kafka consumer groups, plan lag-aware assignments, publish them.",
    )
    parser.add_argument("--version", action="version", version=f"rebalance-advisor {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; Ctrl-C anywhere (imports and parsing included) ends it with 130, no traceback."""
    try:
        return _run(argv)
    except KeyboardInterrupt:
        print("rebalance-advisor: interrupted", file=sys.stderr)
        return 130


def console_main() -> int:
    """The ``rebalance-advisor`` program (and ``python -m rebalance_advisor.cli``): :func:`main`, then
    a Ctrl-C while the interpreter shuts down (joining client threads, closing Kafka clients) ends
    the process at once with 130 instead of a KeyboardInterrupt traceback; the output is complete
    by then. Not in :func:`main`, which tests call in-process."""
    code = main()
    with contextlib.suppress(OSError):  # a reader gone meanwhile: nothing more can be written
        sys.stdout.flush()
        sys.stderr.flush()
    signal.signal(signal.SIGINT, _exit_interrupted)
    return code


def _exit_interrupted(_signum: int, _frame: object) -> None:
    os._exit(130)


def _run(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe must fail here, inside the handler, not at interpreter exit
        return code
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, as Python's docs advise. Point stdout at
        # /dev/null so the interpreter's final flush does not raise (and print) a second time.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 1
    except AdvisorError as error:
        print(f"rebalance-advisor: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(console_main())
