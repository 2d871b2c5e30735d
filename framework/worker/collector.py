"""The cyclic garbage collector while a worker loops: full collections skip start-up.

Every record makes short-lived container objects (its fetched record, envelope, decoded
value, output row), and a fetched batch or a commit's outputs live long enough to reach
the oldest generation, so CPython runs a full collection every few batches; each walks
every object the process made while starting (modules, clients, config) although none of
them is ever garbage. `tuned_collector` collects once, then freezes what is left
(`gc.freeze`: later collections skip it) for the duration of the loop, and unfreezes it
after, so a worker run in-process (tests) leaves the interpreter as it found it.
Nothing is left uncollected: records are freed by reference counting as before, and
cycles made while looping are found as before.

The loop also raises the thresholds to `LOOP_THRESHOLDS` (CPython's default is 700, 10,
10): a fetched batch and a commit's outputs outlive many young collections, each of which
walks them again, and past a commit's worth of outputs a young collection finds most of
them already freed by the commit. Only cyclic garbage waits longer to be found (up to
500,000 tracked objects). The measurements behind these values are in bench/RESULTS.md.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["LOOP_THRESHOLDS", "tuned_collector"]

LOOP_THRESHOLDS = (500_000, 20, 10)
"""The collector's thresholds while a worker loops (allocations; young collections per
middle one; middle per full)."""

_depth = 0
_saved: tuple[int, int, int] | None = None


@contextmanager
def tuned_collector() -> Iterator[None]:
    """Collect, freeze the heap and raise the thresholds inside the ``with``; nested uses
    (several workers in one process) restore both when the last one ends."""
    global _depth, _saved
    if _depth == 0:
        gc.collect()
        gc.freeze()
        _saved = gc.get_threshold()
        gc.set_threshold(*LOOP_THRESHOLDS)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            gc.unfreeze()
            if _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None
