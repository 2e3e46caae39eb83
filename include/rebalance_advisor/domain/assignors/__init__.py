"""Assignors: pure functions GroupSpec -> Assignment, one module per strategy, looked up by name.

Each strategy module exposes ``NAME``, ``OPTIONS`` (option name -> parser that accepts the typed
value or the CLI's string and raises AdvisorError when it is bad) and ``owners(spec, **options)``
returning the member index per partition index (-1 = unassigned). This package wraps them into
:class:`Assignor` objects so callers get one interface; the NumPy ``owners`` form is what the
planner and metrics use, :meth:`Assignor.assign` is the public dict form.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

import numpy as np

from rebalance_advisor.domain.assignors import (
    key_range,
    lag_aware,
    lag_aware_sticky,
    range_assignor,
    rate_aware,
    rate_aware_sticky,
    roundrobin,
    sticky,
)
from rebalance_advisor.domain.group_spec import Assignment, GroupSpec
from rebalance_advisor.domain.parameters import OPT_IN_STRATEGY_NAMES
from rebalance_advisor.errors import AdvisorError


class Assignor(Protocol):
    """What every strategy offers: a name and a pure assign function."""

    name: str

    def assign(self, spec: GroupSpec, **options: Any) -> Assignment: ...

    def owners(self, spec: GroupSpec, **options: Any) -> np.ndarray: ...


@dataclass(frozen=True)
class ModuleAssignor:
    """Adapts a strategy module to :class:`Assignor`, validating options on the way in."""

    name: str
    compute: Callable[..., np.ndarray]
    options: Mapping[str, Callable[[Any], Any]]

    def parse_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        parsed = {}
        for key, value in options.items():
            parser = self.options.get(key)
            if parser is None:
                known = ", ".join(sorted(self.options)) or "none"
                raise AdvisorError(f"strategy {self.name!r} has no option {key!r} (options: {known})")
            parsed[key] = parser(value)
        return parsed

    def owners(self, spec: GroupSpec, **options: Any) -> np.ndarray:
        return self.compute(spec, **self.parse_options(options))

    def assign(self, spec: GroupSpec, **options: Any) -> Assignment:
        return spec.to_assignment(self.owners(spec, **options))


def _wrap(module: ModuleType) -> ModuleAssignor:
    return ModuleAssignor(name=module.NAME, compute=module.owners, options=module.OPTIONS)


#: name -> assignor, in the order the CLI lists them.
ASSIGNORS: dict[str, ModuleAssignor] = {
    a.name: a
    for a in map(
        _wrap,
        (
            range_assignor,
            roundrobin,
            sticky,
            lag_aware,
            lag_aware_sticky,
            rate_aware,
            rate_aware_sticky,
            key_range,
        ),
    )
}

#: strategies that run only when asked for by name, never as a default candidate
OPT_IN_STRATEGIES: tuple[str, ...] = OPT_IN_STRATEGY_NAMES


def get_assignor(name: str) -> ModuleAssignor:
    """The assignor called ``name``; an unknown name raises AdvisorError listing the known ones."""
    try:
        return ASSIGNORS[name]
    except KeyError:
        raise AdvisorError(f"unknown strategy {name!r} (known: {', '.join(ASSIGNORS)})") from None


__all__ = ["ASSIGNORS", "OPT_IN_STRATEGIES", "Assignor", "ModuleAssignor", "get_assignor"]
