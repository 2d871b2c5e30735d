"""The cyclic garbage collector while a worker loops: fewer, cheaper collections.

Every record makes short-lived container objects (its fetched record, envelope, decoded
value, output row), and a fetched batch or a commit's outputs stay alive long enough to
be promoted to the oldest generation. With CPython's defaults (a young collection per
700 net allocations, a full one whenever the old generation grew by a quarter) the
worker spent about a tenth of its CPU in collections on the per-key sum benchmark on
Kafka (0.7 of ~7 CPU µs per record, timed with `gc.callbacks`; a third of that tuned),
each full one walking every object the process made while starting. `tuned_collector`
freezes what start-up made (after collecting it, so no garbage is frozen: `gc.freeze`)
and raises the young generation's threshold for the duration of the loop; it restores
both after, so a worker run in-process (tests) leaves the interpreter as it found it.
Nothing is left uncollected: records are freed by reference counting as before, and
reference cycles are still found, only after more allocations.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["YOUNG_THRESHOLD", "tuned_collector"]

YOUNG_THRESHOLD = 50_000
"""Net allocations of container objects between two young collections while a worker
loops (CPython's default is 700): more than a fetched batch makes, so most of a batch's
objects are freed before a collection would see them."""

_depth = 0
_saved: tuple[int, int, int] = gc.get_threshold()


@contextmanager
def tuned_collector() -> Iterator[None]:
    """Freeze start-up's objects and raise the young threshold inside the ``with``; nested
    uses (several workers in one process) restore the settings when the last one ends."""
    global _depth, _saved
    if _depth == 0:
        _saved = gc.get_threshold()
        gc.collect()
        gc.freeze()
        gc.set_threshold(max(YOUNG_THRESHOLD, _saved[0]), *_saved[1:])
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            gc.set_threshold(*_saved)
            gc.unfreeze()
