"""Event-time watermarks carried in the streams, for tasks whose results must not depend on
which input a worker happened to read first (joins, enrichment) nor on expansion restarts.

A producer writes ``{"watermark": T}`` records under *marker keys* — one per partition
(`marker_keys`) — promising that no later record of that stream has ``ts < T``. A task
tracks the latest ``T`` per marker key (a key's records stay in order across an expansion;
a partition's records do not) and its watermark is the least of them, once every input
partition has delivered a marker.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from framework.api import Envelope, KeyValueStore
from framework.partitioner import partition_for_key
from groupers import SystemStreamPartition

__all__ = ["Watermarks", "is_watermark", "marker_keys", "paced_workload"]


R = TypeVar("R")


def paced_workload(
    total: int,
    events: Callable[[int, int], Iterable[tuple[int, R]]],
    watermarks: Callable[[int], list[R]],
    *,
    step_ms: int,
    max_delay_ms: int,
    every_ms: int,
    reserve: int,
    end_of_time: int = 10**15,
) -> Iterator[R]:
    """Exactly ``total`` records of a generator's event-time workload, watermarks included.

    Event time advances by ``step_ms`` per event number; ``events(number, now)`` gives that
    event's records with the time each is *produced* (at most ``max_delay_ms`` after its
    ``ts``), and they come out in production order. Every ``every_ms`` a round of
    ``watermarks(T)`` is written with T = now − ``max_delay_ms`` (a promise the delay bound
    keeps). The workload ends with repeated last rounds (harmless) to reach ``total`` and a
    final round at ``end_of_time`` that closes every window. ``reserve`` is the most records
    one event can make.
    """
    round_size = len(watermarks(0))
    scheduled: list[tuple[int, int, R]] = []
    order = itertools.count()
    produced = 0
    now = next_round = last = 0
    for number in itertools.count():
        # Keep room for what is scheduled, one more round, one event and the last round.
        if total - produced - len(scheduled) - 2 * round_size - reserve < 0:
            break
        now += step_ms
        while scheduled and scheduled[0][0] <= now:
            produced += 1
            yield heapq.heappop(scheduled)[2]
        if now >= next_round:
            last = max(0, now - max_delay_ms)
            for record in watermarks(last):
                produced += 1
                yield record
            next_round += every_ms
        for at, record in events(number, now):
            heapq.heappush(scheduled, (at, next(order), record))
    while scheduled:
        produced += 1
        yield heapq.heappop(scheduled)[2]
    filler = itertools.cycle(watermarks(last))
    while produced < total - round_size:
        produced += 1
        yield next(filler)
    yield from watermarks(end_of_time)


def is_watermark(value: Any) -> bool:
    """True for a watermark record's value ``{"watermark": T}``."""
    return isinstance(value, dict) and "watermark" in value


def marker_keys(stream: str, partitions: int) -> list[str]:
    """One key per partition of a ``partitions``-partition stream, in partition order.

    Chosen for the *final* partition count, they also cover every count dividing it,
    since expansion keeps ``p' ≡ p (mod n)``.

        >>> keys = marker_keys("clicks", 4)
        >>> [partition_for_key(k.encode(), 4) for k in keys]
        [0, 1, 2, 3]
    """
    found: dict[int, str] = {}
    for n in itertools.count():
        key = f"~watermark-{stream}-{n}"
        found.setdefault(partition_for_key(key.encode(), partitions), key)
        if len(found) == partitions:
            return [found[p] for p in range(partitions)]
    raise AssertionError("unreachable")


class Watermarks:
    """The event time up to which a task has seen every record of its inputs.

    State lives in ``store`` (keys ``key|<marker key>`` → T, and ``established`` once
    every input partition delivered a marker), so it survives restarts and expansions.
    """

    def __init__(self, store: KeyValueStore, ssps: Iterable[SystemStreamPartition]) -> None:
        self.store = store
        self.waiting = {(s.stream, s.partition) for s in ssps}
        self.marks: dict[str, int] = {k[4:]: t for k, t in store.prefix("key|")}

    def observe(self, envelope: Envelope) -> int | None:
        """Record a marker; return the new watermark if it moved forward, else None."""
        before = self.current()
        self.marks[envelope.key] = envelope.value["watermark"]
        self.store.put(f"key|{envelope.key}", envelope.value["watermark"])
        self.waiting.discard((envelope.ssp.stream, envelope.ssp.partition))
        if not self.waiting and not self.store.get("established"):
            self.store.put("established", True)
        after = self.current()
        return after if after is not None and (before is None or after > before) else None

    def current(self) -> int | None:
        """The watermark, or None until every input partition delivered a marker."""
        if not self.store.get("established") or not self.marks:
            return None
        return min(self.marks.values())
