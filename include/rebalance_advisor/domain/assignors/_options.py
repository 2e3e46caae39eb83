"""Option parsers shared by the strategies: accept a typed value or the CLI's ``key=value`` string."""

from __future__ import annotations

from typing import Any

import numpy as np

from rebalance_advisor.errors import AdvisorError

_UNLIMITED = {"", "none", "null", "unlimited", "inf"}


def choice(name: str, allowed: tuple[str, ...]):
    def parse(value: Any) -> str:
        if value not in allowed:
            raise AdvisorError(f"option {name}={value!r}: must be one of {', '.join(allowed)}")
        return value

    return parse


def optional_count(name: str):
    """A non-negative integer, or None (unlimited) from None / 'unlimited'."""

    def parse(value: Any) -> int | None:
        if value is None or (isinstance(value, str) and value.strip().lower() in _UNLIMITED):
            return None
        try:
            number = int(value) if not isinstance(value, bool) else -1
        except (TypeError, ValueError):
            raise AdvisorError(
                f"option {name}={value!r}: must be a whole number >= 0 or 'unlimited'"
            ) from None
        if number < 0 or (isinstance(value, float) and value != number):
            raise AdvisorError(f"option {name}={value!r}: must be a whole number >= 0 or 'unlimited'")
        return number

    return parse


def optional_amount(name: str):
    """A non-negative number, or None (the strategy's default) from None / 'auto'."""

    def parse(value: Any) -> float | None:
        if value is None or (isinstance(value, str) and value.strip().lower() in {"auto", "default"}):
            return None
        try:
            number = float(value) if not isinstance(value, bool) else -1.0
        except (TypeError, ValueError):
            raise AdvisorError(f"option {name}={value!r}: must be a number >= 0 or 'auto'") from None
        if not number >= 0 or number == float("inf"):
            raise AdvisorError(f"option {name}={value!r}: must be a number >= 0 or 'auto'")
        return number

    return parse


def flag(name: str):
    """A yes/no option: a bool, or the CLI's 'true'/'false' (also 1/0, yes/no)."""
    words = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}

    def parse(value: Any) -> bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in words:
            return words[value.strip().lower()]
        raise AdvisorError(f"option {name}={value!r}: must be true or false")

    return parse


def index_pairs(name: str):
    """(partition, member) index pairs as an int array [n, 2], or None (no pairs) from None / empty."""

    def parse(value: Any) -> np.ndarray | None:
        if value is None:
            return None
        try:
            pairs = np.asarray(value, dtype=np.int64).reshape(-1, 2)
        except (TypeError, ValueError):
            raise AdvisorError(f"option {name}: must be (partition, member) index pairs") from None
        if (pairs < 0).any():
            raise AdvisorError(f"option {name}: indexes must be >= 0")
        return pairs if len(pairs) else None

    return parse
