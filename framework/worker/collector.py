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

Measured with `gc.callbacks` on the per-key sum benchmark on Kafka, with start-up's
objects and 300k input records of the harness in the heap: full collections took about
5 µs per record unfrozen, 0.3–1.3 frozen (the shared machine's load moves both).

The loop also raises the thresholds to `LOOP_THRESHOLDS` (CPython's default is 700, 10,
10): a fetched batch and a commit's outputs outlive many young collections, and each
collection walks them again. On the local log (1M records, `gc.callbacks` around the
worker's run only, three runs each) the collector's time fell from 0.46–0.60 to
0.24–0.35 µs per record: 104 young collections of ~2 ms instead of ~3,900 of ~70 µs,
4 middle and 1 full instead of ~355 and ~30. Cycles wait longer to be found, so a
task that makes cyclic garbage holds it a little longer; nothing else changes.

The young threshold went from 20,000 to 100,000 allocations for jobs that keep many
containers until a commit (window results as dicts, the states of open windows):
`bench.windows`' hopping count with four results per window spent 0.62–0.66 µs per
record in young and middle collections at 20,000 and 0.30–0.42 at 100,000 (1M records,
two runs each, the first full collection left out); the hopping count 0.15 and
0.06–0.07; the per-key sum 0.14–0.16 and 0.13–0.16.

Then from 100,000 to 500,000: past a commit's worth of outputs, a young collection finds
most of them already freed by the commit instead of walking them. Young and middle
collections, µs per record (same method, one run per job and threshold, two where a
range is given): four results 0.46–0.47 at 100,000, 0.17–0.30 at 300,000 and
0.02–0.03 at 500,000; the per-key sum 0.14, 0.11 and 0.00; at 100,000 and 300,000, the
hopping count 0.11 and 0.05, the session count 0.09 and 0.01, the interval join 0.08
and 0.00. The count is of allocations net of frees, so only cyclic garbage waits longer
(up to 500,000 tracked objects); the four-results run's peak resident memory went from
456 to 462 MB.
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
