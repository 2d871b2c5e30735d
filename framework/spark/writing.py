"""Executor side of the DataSource writer: encode Arrow rows and produce them to a stream.

Binary key/value columns are written as they are; string columns are the read side's
rendering (text for the ``string`` serde, JSON text otherwise) and go through the
stream's serdes. A non-null ``partition`` column pins the partition; otherwise the Kafka
default partitioner places keyed records and keyless ones go round robin.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from framework.config import load_config
from framework.config.serdes import Serde, get_serde
from framework.partitioner import RoundRobin, partition_for_key
from framework.spark.options import SourceOptions
from framework.spark.streams import resolve_stream
from framework.systems import open_system
from framework.systems.base import ProducerRecord

__all__ = ["write_batches"]

_CHUNK = 10_000


def _encoder(serde: Serde, column: pa.Array) -> Any:
    if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
        return lambda v: v
    name = getattr(serde, "name", "")
    if name == "string":
        return serde.to_bytes
    if name == "bytes":
        return str.encode
    return lambda v: serde.to_bytes(json.loads(v))


def write_batches(options: SourceOptions, count: int, batches: Iterator[pa.RecordBatch]) -> int:
    """Produce every row of ``batches`` to ``options.stream`` (``count`` partitions)."""
    config = load_config(options.job)
    stream = resolve_stream(config, options.stream)
    key_serde = get_serde(stream.key_serde, search_path=config.root)
    value_serde = get_serde(stream.value_serde, search_path=config.root)
    turns = RoundRobin()
    loop = asyncio.new_event_loop()
    system = open_system(config.system(stream.system))
    written = 0
    try:
        for batch in batches:
            keys, values = batch.column("key"), batch.column("value")
            encode_key, encode_value = _encoder(key_serde, keys), _encoder(value_serde, values)
            pinned = (batch.column("partition").to_pylist() if "partition" in batch.schema.names
                      else [None] * batch.num_rows)
            records = []
            for key, value, partition in zip(keys.to_pylist(), values.to_pylist(), pinned,
                                             strict=True):
                key_bytes = None if key is None else encode_key(key)
                if partition is None:
                    partition = (turns.next_partition(stream.stream, count) if key_bytes is None
                                 else partition_for_key(key_bytes, count))
                records.append(ProducerRecord(
                    stream.stream, key_bytes, None if value is None else encode_value(value),
                    partition=int(partition)))
            for start in range(0, len(records), _CHUNK):
                loop.run_until_complete(system.produce(records[start:start + _CHUNK]))
            written += len(records)
    finally:
        loop.run_until_complete(system.close())
        loop.close()
    return written
