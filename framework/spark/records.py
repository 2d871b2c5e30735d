"""Executor side of the DataSource: read one partition range into Arrow record batches.

Runs in Spark's Python worker processes, so it opens the job's system itself and drives
the async system API on a private event loop. Records move in bulk, never one object per
record: the local log in large primary-key range scans straight into columns, Kafka in
large Fetch requests of our own (`framework.spark.kafka_fetch`), any other system through
its consumer. Keys and values are then decoded column-wise (`framework.spark.arrow_columns`),
and the next scan or fetch is under way while Spark takes a batch.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol, runtime_checkable

import pyarrow as pa

from framework.config import load_config
from framework.config.serdes import get_serde
from framework.spark import kafka_fetch
from framework.spark.arrow_columns import (
    DECODED_SCHEMA,
    RAW_SCHEMA,
    ColumnDecoder,
    RecordColumns,
    arrow_schema,
    record_batch,
    render,
)
from framework.spark.options import PartitionRange
from framework.spark.streams import resolve_stream
from framework.systems import open_system
from framework.systems.base import Record, System
from framework.systems.kafka.system import KafkaSystem
from framework.systems.reading import read_range
from groupers import SystemStreamPartition

__all__ = ["DECODED_SCHEMA", "RAW_SCHEMA", "RecordColumnReader", "arrow_schema", "collector_paused",
           "column_chunks",
           "read_partition", "records_to_columns", "render"]

FIRST_ROWS = 4_096
"""Rows of the first local scan, which sizes the next ones."""
MAX_ROWS = 32_768
"""Most rows per local scan (and so per Arrow batch). Moderate batches let Spark consume
one while the next is read; 131,072-row batches read 1M records ~1.5× slower."""
TARGET_BYTES = 4 << 20
"""Key and value bytes a local scan aims at: big records get fewer rows per batch."""

BulkRead = Callable[[str, int, int, int, int], Awaitable[RecordColumns]]


@runtime_checkable
class RecordColumnReader(Protocol):
    """A system that reads a range of one partition as columns of every field, without a
    `Record` per row (the local log): the bulk read of the DataSource."""

    async def read_record_columns(
        self, stream: str, partition: int, start: int, end: int, limit: int
    ) -> RecordColumns:
        """Up to ``limit`` records of ``[start, end)`` as `RecordColumns`."""
        ...


def records_to_columns(records: Sequence[Record]) -> RecordColumns:
    """`Record` objects as (offsets, keys, values, timestamps, headers) columns."""
    return ([r.offset for r in records], [r.key for r in records], [r.value for r in records],
            [r.timestamp for r in records], [r.headers for r in records])


async def _bulk_columns(
    read: BulkRead, stream: str, partition: int, start: int, end: int
) -> AsyncGenerator[RecordColumns, None]:
    """Range scans of ``[start, end)``: a small first one, then sized to `TARGET_BYTES`."""
    position, limit = start, FIRST_ROWS
    while position < end:
        columns = await read(stream, partition, position, end, limit)
        offsets = columns[0]
        if not offsets:
            return
        yield columns
        if len(offsets) < limit:
            return
        if limit == FIRST_ROWS:
            size = sum(len(b) for column in columns[1:3] for b in column if b is not None)
            limit = max(FIRST_ROWS, min(MAX_ROWS, TARGET_BYTES * len(offsets) // max(size, 1)))
        position = offsets[-1] + 1


async def _consumer_columns(
    system: System, ssp: SystemStreamPartition, start: int, end: int
) -> AsyncGenerator[RecordColumns, None]:
    async for records in read_range(system, ssp, start, end, 10_000):
        yield records_to_columns(records)


def column_chunks(
    system: System, stream: str, partition: int, start: int, end: int
) -> AsyncGenerator[RecordColumns, None]:
    """The records of ``stream[partition]`` in ``[start, end)`` as column chunks, read the
    fastest way ``system`` offers."""
    if isinstance(system, KafkaSystem) and kafka_fetch.AVAILABLE:
        return kafka_fetch.read_kafka_columns(system, stream, partition, start, end)
    if isinstance(system, RecordColumnReader):
        return _bulk_columns(system.read_record_columns, stream, partition, start, end)
    return _consumer_columns(system, SystemStreamPartition(system.name, stream, partition),
                             start, end)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for one bulk read: it allocates a tuple or record
    object per row, none in a cycle, and the collections they trigger (each walking every
    live object) cost as much as the read itself."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_partition(part: PartitionRange) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``part`` as Arrow batches (called inside a Spark task)."""
    if part.start >= part.end:
        return
    config = load_config(part.job)
    stream = resolve_stream(config, part.stream)
    decoders = None if part.raw else (
        ColumnDecoder(get_serde(stream.key_serde, search_path=config.root), "key", part.stream),
        ColumnDecoder(get_serde(stream.value_serde, search_path=config.root), "value",
                      part.stream))
    schema = arrow_schema(part.raw)
    loop = asyncio.new_event_loop()
    system = open_system(config.system(stream.system))
    chunks = column_chunks(system, stream.stream, part.partition, part.start, part.end)

    async def next_chunk() -> RecordColumns | None:
        return await anext(chunks, None)

    pending = loop.create_task(next_chunk())
    try:
        while True:
            with collector_paused():  # not across the yield: Spark's code runs there
                columns = loop.run_until_complete(pending)
                if columns is None:
                    break
                # Start the next scan or fetch now (on the system's thread, or at the
                # broker), so that it overlaps with Spark taking this batch.
                pending = loop.create_task(next_chunk())
                loop.run_until_complete(asyncio.sleep(0))
                batch = record_batch(columns, part.partition, schema, decoders)
                del columns
            yield batch
    finally:
        pending.cancel()
        loop.run_until_complete(asyncio.gather(pending, return_exceptions=True))
        loop.run_until_complete(chunks.aclose())
        loop.run_until_complete(system.close())
        loop.close()
