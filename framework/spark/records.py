"""Executor side of the DataSource: read one partition range into Arrow record batches.

Runs in Spark's Python worker processes, so it opens the job's system itself and drives
the async system API on a private event loop, one fetched batch at a time.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

from framework.config import load_config
from framework.serdes import Serde, get_serde
from framework.spark.options import PartitionRange
from framework.spark.streams import resolve_stream
from framework.systems import open_system
from framework.systems.base import Record
from framework.systems.reading import read_range
from groupers import SystemStreamPartition

__all__ = ["DECODED_SCHEMA", "RAW_SCHEMA", "arrow_schema", "read_partition", "render"]

RAW_SCHEMA = (
    "key binary, value binary, partition int, offset bigint, timestamp bigint, "
    "headers array<struct<key: string, value: binary>>"
)
DECODED_SCHEMA = RAW_SCHEMA.replace("key binary, value binary", "key string, value string")

_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def arrow_schema(raw: bool) -> pa.Schema:
    """The Arrow schema matching `RAW_SCHEMA` / `DECODED_SCHEMA`."""
    payload = pa.binary() if raw else pa.string()
    return pa.schema([("key", payload), ("value", payload), ("partition", pa.int32()),
                      ("offset", pa.int64()), ("timestamp", pa.int64()), ("headers", _HEADERS)])


def render(obj: Any) -> str | None:
    """A decoded key or value as a string column: text as is, anything else as compact JSON.

    >>> render("word-1"), render({"seq": 3}), render(7), render(None)
    ('word-1', '{"seq":3}', '7', None)
    """
    if obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, bytes | bytearray | memoryview):
        return bytes(obj).decode("utf-8", "replace")
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=str)


def to_batch(
    records: Sequence[Record], schema: pa.Schema, serdes: tuple[Serde, Serde] | None
) -> pa.RecordBatch:
    """Records as one Arrow batch; ``serdes`` (key, value) decode, None keeps bytes."""
    if serdes is None:
        keys: list[Any] = [r.key for r in records]
        values: list[Any] = [r.value for r in records]
    else:
        key_serde, value_serde = serdes
        keys = [None if r.key is None else render(key_serde.from_bytes(r.key)) for r in records]
        values = [None if r.value is None else render(value_serde.from_bytes(r.value))
                  for r in records]
    columns = [
        keys, values, [r.partition for r in records], [r.offset for r in records],
        [r.timestamp for r in records],
        [[{"key": k, "value": v} for k, v in r.headers] for r in records],
    ]
    return pa.RecordBatch.from_arrays(
        [pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)], schema=schema)


def read_partition(part: PartitionRange, batch_size: int = 10_000) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``part`` as Arrow batches (called inside a Spark task)."""
    if part.start >= part.end:
        return
    config = load_config(part.job)
    stream = resolve_stream(config, part.stream)
    serdes = None if part.raw else (
        get_serde(stream.key_serde, search_path=config.root),
        get_serde(stream.value_serde, search_path=config.root))
    schema = arrow_schema(part.raw)
    loop = asyncio.new_event_loop()
    system = open_system(config.system(stream.system))
    ssp = SystemStreamPartition(stream.system, stream.stream, part.partition)
    batches = read_range(system, ssp, part.start, part.end, batch_size)
    try:
        while True:
            try:
                records = loop.run_until_complete(batches.__anext__())
            except StopAsyncIteration:
                break
            yield to_batch(records, schema, serdes)
    finally:
        loop.run_until_complete(batches.aclose())
        loop.run_until_complete(system.close())
        loop.close()
