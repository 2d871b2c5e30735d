"""An in-memory system for `framework.testing`: the local log's semantics, no disk.

Commits are atomic and fenced like the local log's (outputs, changelog records and
checkpoints land together or not at all), so a test driving the real `Committer` over it
sees exactly what a worker on the local log would commit. One process, one event loop;
nothing survives the object.

>>> import asyncio
>>> async def demo() -> list[tuple[int, bytes | None]]:
...     system = MemorySystem("local")
...     await system.create_stream("clicks", 2)
...     await system.produce([ProducerRecord("clicks", b"k", b"v", partition=1)])
...     consumer = system.consumer()
...     consumer.assign({SystemStreamPartition("local", "clicks", 1): 0})
...     batch = await consumer.fetch()
...     return [(r.offset, r.value) for records in batch.values() for r in records]
>>> asyncio.run(demo())
[(0, b'v')]
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from framework.errors import ConfigError, FencedError, JobModelError, StreamNotFoundError
from framework.partitioner import RoundRobin, partition_for_key
from framework.systems.base import (
    Checkpoint,
    CommitRequest,
    OffsetRange,
    ProducerRecord,
    Record,
    RecordPosition,
    fence_message,
)
from groupers import SystemStreamPartition

__all__ = ["MemoryConsumer", "MemorySystem"]


@dataclass
class _Stream:
    partitions: list[list[Record]]
    compacted: bool = False
    ends: list[int] = field(default_factory=list)
    """Per partition, the offset the next record gets (compaction leaves gaps below it)."""


class MemorySystem:
    """A `System` held in lists: streams, checkpoints and fences of one process."""

    atomic_commit = True

    def __init__(self, name: str, *, auto_create: bool = False) -> None:
        self.name = name
        self.auto_create = auto_create
        """Create a stream on its first write, and grow it to a partition written to
        (for tests, whose output streams are not declared anywhere)."""
        self._streams: dict[str, _Stream] = {}
        self._checkpoints: dict[str, dict[str, Checkpoint]] = {}
        self._fences: dict[str, int] = {}
        self._turns = RoundRobin()

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def _stream(self, name: str) -> _Stream:
        found = self._streams.get(name)
        if found is None:
            raise StreamNotFoundError(
                f"stream {self.name}.{name} does not exist in the in-memory system; create "
                f"it first (declare it with partitions = N, or create_stream)")
        return found

    async def list_streams(self) -> dict[str, int]:
        return {name: len(s.partitions) for name, s in self._streams.items()}

    async def partition_counts(self, streams: Sequence[str]) -> dict[str, int]:
        return {name: len(self._stream(name).partitions) for name in streams}

    async def create_stream(self, stream: str, partitions: int, *, compacted: bool = False,
                            exist_ok: bool = False) -> None:
        if stream in self._streams:
            if exist_ok:
                return
            raise ConfigError(f"stream {self.name}.{stream} already exists")
        self._streams[stream] = _Stream([[] for _ in range(partitions)], compacted,
                                        [0] * partitions)

    async def expand_stream(self, stream: str, partitions: int) -> None:
        found = self._stream(stream)
        while len(found.partitions) < partitions:
            found.partitions.append([])
            found.ends.append(0)

    async def offsets(self, stream: str) -> dict[int, OffsetRange]:
        found = self._stream(stream)
        return {p: OffsetRange(records[0].offset if records else found.ends[p], found.ends[p])
                for p, records in enumerate(found.partitions)}

    async def offsets_for_time(self, stream: str, timestamp_ms: int) -> dict[int, int]:
        """Per partition, the first record stamped at or after ``timestamp_ms``, else the
        end (`framework.systems.base.OffsetsByTime`)."""
        found = self._stream(stream)
        return {p: next((r.offset for r in records if r.timestamp >= timestamp_ms),
                        found.ends[p]) for p, records in enumerate(found.partitions)}

    def consumer(self) -> MemoryConsumer:
        return MemoryConsumer(self)

    def _append(self, records: Sequence[ProducerRecord], wanted: int) -> list[RecordPosition]:
        """Place and append every record (all checked first: all land or none)."""
        placed = []
        for record in records:
            if self.auto_create:
                stream = self._streams.setdefault(record.stream, _Stream([[]], ends=[0]))
                while record.partition is not None and record.partition >= len(
                        stream.partitions):
                    stream.partitions.append([])
                    stream.ends.append(0)
            stream = self._stream(record.stream)
            count = len(stream.partitions)
            partition = record.partition
            if partition is None:
                partition = (partition_for_key(record.key, count) if record.key is not None
                             else self._turns.next_partition(record.stream, count))
            if not 0 <= partition < count:
                raise ConfigError(f"stream {self.name}.{record.stream} has {count} "
                                  f"partitions; partition {partition} does not exist")
            placed.append((stream, partition, record))
        positions = []
        for index, (stream, partition, record) in enumerate(placed):
            offset = stream.ends[partition]
            stream.ends[partition] = offset + 1
            stream.partitions[partition].append(Record(
                partition, offset, record.key, record.value, record.timestamp or 0,
                record.headers))
            if index < wanted:
                positions.append(RecordPosition(record.stream, partition, offset))
        return positions

    async def produce(self, records: Sequence[ProducerRecord], *,
                      positions: int | None = None) -> list[RecordPosition]:
        return self._append(records, len(records) if positions is None else positions)

    async def commit(self, request: CommitRequest) -> list[RecordPosition]:
        current = self._fences.get(request.job)
        if current is not None and current != request.epoch:
            raise FencedError(fence_message(request.job, request.epoch, current))
        wanted = len(request.records) if request.positions is None else request.positions
        landed = self._append(request.records, wanted)
        job = self._checkpoints.setdefault(request.job, {})
        for checkpoint in request.checkpoints:
            job[checkpoint.task] = checkpoint
        return landed

    async def read_checkpoints(self, job: str) -> dict[str, Checkpoint]:
        return dict(self._checkpoints.get(job, {}))

    async def fence(self, job: str, epoch: int) -> None:
        self._fences[job] = max(epoch, self._fences.get(job, epoch))

    async def fenced_epoch(self, job: str) -> int | None:
        return self._fences.get(job)

    async def advance_fence(self, job: str, epoch: int, *, in_place: bool = False,
                            gone: Collection[int] = ()) -> None:
        current = self._fences.get(job)
        if current is not None and epoch <= current:
            raise JobModelError(f"job {job!r}: epoch {epoch} is not above the current "
                                f"epoch {current}")
        self._fences[job] = epoch

    async def check_fence(self, job: str, epoch: int) -> None:
        current = self._fences.get(job)
        if current is not None and current != epoch:
            raise FencedError(fence_message(job, epoch, current))

    async def compact(self, stream: str) -> int:
        found = self._stream(stream)
        if not found.compacted:
            return 0
        dropped = 0
        for partition, records in enumerate(found.partitions):
            latest = {r.key: r.offset for r in records}
            kept = [r for r in records if latest[r.key] == r.offset]
            dropped += len(records) - len(kept)
            found.partitions[partition] = kept  # offsets stay; reads skip the gaps
        return dropped

    def records(self, stream: str, partition: int, start: int = 0) -> list[Record]:
        """The records of one partition from offset ``start`` on, in offset order."""
        return [r for r in self._stream(stream).partitions[partition] if r.offset >= start]


class MemoryConsumer:
    """A consumer of a `MemorySystem`: reads assigned partitions from given positions."""

    def __init__(self, system: MemorySystem) -> None:
        self._system = system
        self._positions: dict[SystemStreamPartition, int] = {}

    def assign(self, positions: Mapping[SystemStreamPartition, int]) -> None:
        self._positions = dict(positions)

    def expect_partition_counts(self, counts: Mapping[str, int]) -> None:
        return None

    async def fetch(self, max_records: int = 1000, timeout_ms: int = 100
                    ) -> dict[SystemStreamPartition, list[Record]]:
        batch: dict[SystemStreamPartition, list[Record]] = {}
        left = max_records
        for ssp, position in self._positions.items():
            if left <= 0:
                break
            records = self._system.records(ssp.stream, ssp.partition, position)[:left]
            if records:
                batch[ssp] = records
                self._positions[ssp] = records[-1].offset + 1
                left -= len(records)
        if not batch:
            await asyncio.sleep(timeout_ms / 1000)
        return batch

    async def close(self) -> None:
        return None
