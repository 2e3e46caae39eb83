"""User-given regexes (group patterns from the CLI, the DAG form, the web UI) on a linear-time engine.

Python's ``re`` backtracks: ``(x+)+y`` against a long group id takes exponential time, and a
pattern typed into a form is untrusted input. RE2 (``google-re2``) matches in time linear in the
text and refuses what it cannot do that way (back-references, look-around) - refused here with a
one-line error naming the option. Patterns are full matches, as Kafka's Java tools use
``matches()``. RE2 is a pure matching library (no I/O), so the domain may use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rebalance_advisor.errors import AdvisorError

#: Longest pattern accepted, in characters (a bound on compile time and memory).
MAX_PATTERN_LENGTH = 2000
#: RE2's memory budget for one compiled pattern, in bytes; a bigger automaton is refused.
MAX_PATTERN_MEMORY = 8 << 20


def _options() -> Any:
    import re2

    options = re2.Options()
    options.log_errors = False  # RE2 would print its own copy of the error on stderr
    options.max_mem = MAX_PATTERN_MEMORY
    return options


@dataclass(frozen=True)
class SafeRegex:
    """A compiled full-match pattern; build it with :func:`compile_safe_regex`."""

    pattern: str
    compiled: Any = field(repr=False, compare=False)

    def fullmatch(self, text: str) -> bool:
        return self.compiled.fullmatch(text) is not None


def compile_safe_regex(pattern: str, what: str) -> SafeRegex:
    """``pattern`` compiled by RE2; ``what`` names the option in the error (e.g. ``--groups``)."""
    import re2

    if len(pattern) > MAX_PATTERN_LENGTH:
        raise AdvisorError(f"{what} regex is {len(pattern)} characters long: at most {MAX_PATTERN_LENGTH}")
    try:
        return SafeRegex(pattern, re2.compile(pattern, _options()))
    except re2.error as error:
        detail = (
            error.args[0].decode(errors="replace")
            if error.args and isinstance(error.args[0], bytes)
            else error
        )
        raise AdvisorError(
            f"invalid {what} regex {pattern!r}: {detail} (RE2 syntax: no back-references or look-around)"
        ) from error
