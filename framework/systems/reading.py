"""Read one partition of a system from a start position up to an end position."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence

from framework.systems.base import (
    Consumer,
    FetchedRecord,
    OffsetRange,
    RawFetcher,
    Record,
    SettlesOffsets,
    System,
    as_record,
)
from framework.systems.fetched import FetchedColumns
from groupers import SystemStreamPartition

__all__ = ["final_offsets", "read_columns_range", "read_range"]

Columns = tuple[list[int], list[bytes | None], list[bytes | None]]
"""(offsets, keys, values) of a batch, in offset order."""


async def final_offsets(system: System, stream: str) -> dict[int, OffsetRange]:
    """``stream``'s offsets for reading finished work in full: on Kafka, once the markers
    of transactions that already committed are written (`SettlesOffsets`)."""
    if isinstance(system, SettlesOffsets):
        return await system.settled_offsets(stream)
    return await system.offsets(stream)


async def read_range(
    system: System, ssp: SystemStreamPartition, start: int, end: int, batch: int = 10_000,
    *, consumer: Consumer | None = None,
) -> AsyncIterator[Sequence[Record]]:
    """Yield batches of the records of ``ssp`` with ``start <= offset < end``.

    Stops at ``end`` even while producers keep writing; offsets dropped by compaction
    are simply absent. ``consumer``: read on it (reassigned; left open for the next read
    of a long-lived reader) instead of a consumer of its own.
    """
    partition = ssp.partition
    async for fetched in _read_fetched(system, ssp, start, end, batch, raw=False,
                                       consumer=consumer):
        yield [as_record(partition, record) for record in fetched]


async def read_columns_range(
    system: System, ssp: SystemStreamPartition, start: int, end: int, batch: int = 10_000
) -> AsyncIterator[Columns]:
    """`read_range` as plain (offsets, keys, values) columns, without a `Record` per row:
    what a restore reads from a system that is not a `ColumnReader` (Kafka)."""
    async for fetched in _read_fetched(system, ssp, start, end, batch, raw=True):
        if type(fetched) is FetchedColumns:  # Kafka's: the columns as fetched
            yield fetched.offsets, fetched.keys, fetched.values
            continue
        yield ([record.offset for record in fetched], [record.key for record in fetched],
               [record.value for record in fetched])


async def _read_fetched(
    system: System, ssp: SystemStreamPartition, start: int, end: int, batch: int, *,
    raw: bool, consumer: Consumer | None = None,
) -> AsyncIterator[Sequence[FetchedRecord]]:
    """The fetched records of ``ssp`` in ``[start, end)``; with ``raw`` as the consumer's
    ``fetch_raw`` returns them where it has one (Kafka: aiokafka's own records, no copy)."""
    if start >= end:
        return
    owned = consumer is None
    consumer = system.consumer() if consumer is None else consumer
    fetch: Callable[[int, int], Awaitable[Mapping[SystemStreamPartition,
                                                  Sequence[FetchedRecord]]]]
    fetch = consumer.fetch_raw if raw and isinstance(consumer, RawFetcher) else consumer.fetch
    try:
        consumer.assign({ssp: start})
        position = start
        while position < end:
            records = (await fetch(batch, 200)).get(ssp, ())
            if not records:
                # Compaction can leave the tail below `end` empty; re-check the real end.
                ranges = await system.offsets(ssp.stream)
                current = ranges.get(ssp.partition)
                if current is None or position >= current.end:
                    return
                continue
            last = records[-1].offset
            if last < end:
                yield records
            else:
                wanted = [r for r in records if r.offset < end]
                if wanted:
                    yield wanted
                return
            position = last + 1
    finally:
        if owned:
            await consumer.close()
