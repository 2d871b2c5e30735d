"""Read one partition of a system from a start position up to an end position."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from framework.systems.base import Record, System
from groupers import SystemStreamPartition


async def read_range(
    system: System, ssp: SystemStreamPartition, start: int, end: int, batch: int = 10_000
) -> AsyncIterator[Sequence[Record]]:
    """Yield batches of the records of ``ssp`` with ``start <= offset < end``.

    Stops at ``end`` even while producers keep writing; offsets dropped by compaction
    are simply absent.
    """
    if start >= end:
        return
    consumer = system.consumer()
    try:
        consumer.assign({ssp: start})
        position = start
        while position < end:
            fetched = await consumer.fetch(max_records=batch, timeout_ms=200)
            records = fetched.get(ssp, ())
            if not records:
                # Compaction can leave the tail below `end` empty; re-check the real end.
                ranges = await system.offsets(ssp.stream)
                current = ranges.get(ssp.partition)
                if current is None or position >= current.end:
                    return
                continue
            wanted = [r for r in records if r.offset < end]
            if wanted:
                yield wanted
            position = records[-1].offset + 1
            if len(wanted) < len(records):
                return
    finally:
        await consumer.close()
