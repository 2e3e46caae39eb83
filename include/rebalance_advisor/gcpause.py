"""One switch for Python's cyclic garbage collector around bulk work.

The snapshot collection and write, the planner run and ``GroupSpec``'s tuple building allocate
hundreds of thousands to millions of small acyclic objects; the collections their allocation
triggers rescan every live object, often costing more than the work itself. None of it is
cyclic garbage worth collecting early, so the collector is paused for the block and the caller's
setting restored afterwards (also when the block fails).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Cyclic garbage collection off for the block; the previous setting restored after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
