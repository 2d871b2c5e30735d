"""The ``sampan`` Spark DataSource: batch reader, streaming reader and writer over a stream.

One Spark input partition per stream partition; rows are ``key, value, partition,
offset, timestamp, headers`` (see `framework.spark.records`). The writer produces with
the Kafka default partitioner unless a ``partition`` column says otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from framework.config import load_config
from framework.errors import StreamNotFoundError
from framework.spark.aio import with_system
from framework.spark.errors import SparkOptionError
from framework.spark.options import PartitionRange, SourceOptions, resolve_offsets
from framework.spark.schema import DECODED_SCHEMA, RAW_SCHEMA
from framework.spark.streams import resolve_stream
from framework.systems.base import OffsetRange

if TYPE_CHECKING:
    import pyarrow as pa

try:  # Spark ≥ 4.2 asks sources to fix their end for trigger(availableNow=True)
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - older Spark reads to latestOffset as it goes
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]

__all__ = ["SampanDataSource"]


class _Split(InputPartition):
    """A `PartitionRange` as Spark's picklable input partition."""

    def __init__(self, part: PartitionRange) -> None:
        super().__init__(part.partition)
        self.part = part


def _read(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """The records of one of our splits (in a Spark task). The read path (pyarrow, the Kafka
    fetcher) is imported here, not by the planner processes that only plan the read."""
    from framework.spark.records import read_partition

    assert isinstance(partition, _Split), partition  # the partitions our readers made
    yield from read_partition(partition.part)


def _ranges(options: SourceOptions, *, create: bool = False) -> dict[int, OffsetRange]:
    """Per partition of the stream: oldest and end offset. ``create`` makes a missing stream
    that the job file declares with ``partitions`` (as `sampan run` would)."""
    config = load_config(options.job)
    stream = resolve_stream(config, options.stream)

    async def offsets(system: Any) -> dict[int, OffsetRange]:
        try:
            return dict(await system.offsets(stream.stream))
        except StreamNotFoundError:
            if create and stream.partitions:
                await system.create_stream(stream.stream, stream.partitions,
                                           compacted=stream.compacted, exist_ok=True)
                return dict(await system.offsets(stream.stream))
            raise SparkOptionError(
                f"stream {options.stream} does not exist; create it with `sampan streams "
                f"create {options.stream} --partitions N --job {options.job}`") from None

    return with_system(config, stream.system, offsets)


class SampanDataSource(DataSource):
    """``spark.read.format("sampan")``: a stream of the job's local log or Kafka cluster."""

    @classmethod
    def name(cls) -> str:
        return "sampan"

    def schema(self) -> str:
        raw = str(self.options.get("raw", "false")).lower() == "true"
        return RAW_SCHEMA if raw else DECODED_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _BatchReader(SourceOptions.parse(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _StreamReader(SourceOptions.parse(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        if overwrite:
            raise SparkOptionError(
                'the sampan DataSource only appends to a stream; use .mode("append")')
        return _Writer(SourceOptions.parse(self.options), [f.name for f in schema.fields])


class _BatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.splits = [_Split(p) for p in resolve_offsets(options, _ranges(options))]

    def partitions(self) -> Sequence[InputPartition]:
        return self.splits

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are ``{"<partition>": position}``; partitions added by an expansion are read
    from their oldest offset."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.target: dict[str, int] | None = None

    def initialOffset(self) -> dict[str, int]:
        return {str(p.partition): p.start
                for p in resolve_offsets(self.options, _ranges(self.options))}

    def _latest(self) -> dict[str, int]:
        ranges = _ranges(self.options)
        chosen = self.options.partitions or sorted(ranges)
        return {str(p): ranges[p].end for p in chosen if p in ranges}

    def latestOffset(self, start: dict[str, int] | None = None, limit: Any = None
                     ) -> dict[str, int]:
        if self.target is not None:
            return dict(self.target)
        return self._latest()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._latest()

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return [_Split(PartitionRange(self.options.job, self.options.stream, int(p),
                                      int(start.get(p, 0)), int(position), self.options.raw))
                for p, position in sorted(end.items(), key=lambda item: int(item[0]))
                if int(start.get(p, 0)) < int(position)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)

    def commit(self, end: dict[str, int]) -> None:
        pass


@dataclass
class _Written(WriterCommitMessage):
    records: int


class _Writer(DataSourceArrowWriter):
    def __init__(self, options: SourceOptions, columns: list[str]) -> None:
        if "key" not in columns or "value" not in columns:
            raise SparkOptionError(
                f"writing to {options.stream} needs columns key and value (and optionally "
                f"partition); the DataFrame has {columns}")
        self.options = options
        self.count = len(_ranges(options, create=True))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> _Written:
        from framework.spark.writing import write_batches

        return _Written(write_batches(self.options, self.count, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self.written = sum(m.records for m in messages if isinstance(m, _Written))

