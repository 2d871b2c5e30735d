"""The local system: an embedded, durable, multi-process log in one SQLite file.

It is the default for quick starts, drills and tests, and the system where commits are
exactly-once: `LocalSystem.commit` writes outputs, changelog records and checkpoints in
one transaction, refused when the job has been fenced at a newer epoch.

Each `LocalSystem` owns one connection, used from one worker thread, so a write that
waits for another process's lock never blocks the event loop.

>>> import asyncio, tempfile
>>> from pathlib import Path
>>> async def demo(path: Path) -> list[bytes | None]:
...     system = LocalSystem("local", path)
...     await system.create_stream("clicks", 4)
...     await system.produce([ProducerRecord("clicks", b"user-1", b"hello")])
...     consumer = system.consumer()
...     consumer.assign({SystemStreamPartition("local", "clicks", p): 0 for p in range(4)})
...     batch = await consumer.fetch()
...     await consumer.close()
...     await system.close()
...     return [r.value for records in batch.values() for r in records]
>>> with tempfile.TemporaryDirectory() as tmp:
...     asyncio.run(demo(Path(tmp)))
[b'hello']
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from framework.systems.base import (
    Checkpoint,
    CommitRequest,
    FetchedRecord,
    GrowthHistory,
    OffsetRange,
    OutputColumns,
    ProducerRecord,
    ProducerRow,
    Record,
    RecordPosition,
    producer_row,
)
from framework.systems.local.compact import compact_partition
from framework.systems.local.fetch import (
    Columns,
    RecordColumns,
    Slot,
    read_batch,
    read_columns,
    read_record_columns,
)
from framework.systems.local.log import LocalLog
from framework.systems.local.retention import (
    RetentionPolicy,
    RetentionReset,
    RetentionResult,
    apply_retention,
    partition_bytes,
    read_resets,
    release_free_pages,
)
from framework.systems.local.schema import LocalOptions, database_file
from framework.systems.local.seek import offsets_for_time
from groupers import SystemStreamPartition

__all__ = ["LocalConsumer", "LocalSystem"]

T = TypeVar("T")

_FIRST_BACKOFF_S = 0.002
_MAX_BACKOFF_S = 0.05


class LocalSystem:
    """A `System` over ``<path>/log.sqlite3``; opens the database on first use."""

    atomic_commit = True
    commit_columns = True  # `CommitRequest.columns`: a worker's outputs without a tuple each

    def __init__(
        self, name: str, path: Path, options: Mapping[str, Any] | LocalOptions | None = None
    ) -> None:
        self.name = name
        self.path = Path(path)
        self.options = (
            options if isinstance(options, LocalOptions)
            else LocalOptions.from_mapping(name, options or {})
        )
        self._executor: ThreadPoolExecutor | None = None
        self._log: LocalLog | None = None

    def __repr__(self) -> str:
        return f"LocalSystem({self.name!r}, {str(database_file(self.path))!r})"

    async def start(self) -> None:
        if self._log is not None:
            return
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"sampan-{self.name}")
        loop = asyncio.get_running_loop()
        log = await loop.run_in_executor(
            self._executor, LocalLog, self.name, self.path, self.options
        )
        if self._log is None:
            self._log = log
        else:  # a concurrent start won the race
            await loop.run_in_executor(self._executor, log.close)

    async def close(self) -> None:
        executor, log = self._executor, self._log
        self._executor, self._log = None, None
        if executor is None:
            return
        if log is not None:
            await asyncio.get_running_loop().run_in_executor(executor, log.close)
        executor.shutdown(wait=True)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(log, *args)`` on the connection's thread."""
        await self.start()
        assert self._executor is not None and self._log is not None
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, functools.partial(fn, self._log, *args)
        )

    async def list_streams(self) -> dict[str, int]:
        return await self.call(LocalLog.list_streams)

    async def partition_counts(self, streams: Sequence[str]) -> dict[str, int]:
        return await self.call(LocalLog.partition_counts, list(streams))

    async def create_stream(
        self, stream: str, partitions: int, *, compacted: bool = False, exist_ok: bool = False
    ) -> None:
        await self.call(LocalLog.create_stream, stream, partitions, compacted, exist_ok)

    async def expand_stream(self, stream: str, partitions: int) -> None:
        await self.call(LocalLog.expand_stream, stream, partitions)

    async def offsets(self, stream: str) -> dict[int, OffsetRange]:
        return await self.call(LocalLog.offsets, stream)

    async def offsets_for_time(self, stream: str, timestamp_ms: int) -> dict[int, int]:
        """Per partition, the first record stamped at or after ``timestamp_ms`` (or the
        end): `framework.systems.local.seek`."""
        return await self.call(offsets_for_time, stream, timestamp_ms)

    async def delete_streams(self, streams: Sequence[str]) -> None:
        """Drop ``streams`` and everything the log keeps of them (`DeletesStreams`)."""
        if streams:
            await self.call(LocalLog.delete_streams, list(streams))
            await self.release_free_pages()

    def consumer(self) -> LocalConsumer:
        return LocalConsumer(self)

    async def read_columns(
        self, stream: str, partition: int, start: int, end: int, limit: int
    ) -> Columns:
        """(offsets, keys, values) of up to ``limit`` records in ``[start, end)`` of one
        partition: the fast read of restores (see `framework.stores.changelog_reader`)."""
        return await self.call(read_columns, stream, partition, start, end, limit)

    async def read_record_columns(
        self, stream: str, partition: int, start: int, end: int, limit: int
    ) -> RecordColumns:
        """Every field of up to ``limit`` records in ``[start, end)`` of one partition, as
        columns: the bulk read of the Spark DataSource (see `framework.spark.records`)."""
        return await self.call(read_record_columns, stream, partition, start, end, limit)

    async def produce(self, records: Sequence[ProducerRecord], *,
                      positions: int | None = None) -> list[RecordPosition]:
        return await self.produce_rows(list(map(producer_row, records)), positions=positions)

    async def produce_rows(self, rows: Sequence[ProducerRow], *,
                           positions: int | None = None,
                           columns: Sequence[OutputColumns] = ()) -> list[RecordPosition]:
        """`produce` of plain tuples, then of ``columns`` (what a worker's commit hands
        over: no object per record on the way to the log); positions of rows only."""
        if not rows and not columns:
            return []
        return await self.call(LocalLog.append, rows, None, None, (), positions, columns)

    async def commit(self, request: CommitRequest) -> list[RecordPosition]:
        """The records (all `ProducerRecord`s, or all `ProducerRow`s as a worker's commit
        hands them), its `OutputColumns`, fence check and checkpoints in one SQLite
        transaction."""
        rows: Sequence[ProducerRow] = request.records  # type: ignore[assignment]
        if rows and type(rows[0]) is not tuple:
            rows = list(map(producer_row, request.records))
        return await self.call(
            LocalLog.append, rows, request.job, request.epoch, list(request.checkpoints),
            request.positions, request.columns)

    async def read_checkpoints(self, job: str) -> dict[str, Checkpoint]:
        return await self.call(LocalLog.read_checkpoints, job)

    async def fence(self, job: str, epoch: int) -> None:
        await self.call(LocalLog.fence, job, epoch)

    async def growth_history(self, stream: str) -> GrowthHistory:
        """``stream``'s count, ends and recorded growths in one snapshot (`GrowthRecorder`)."""
        return await self.call(LocalLog.growth_history, stream)

    async def fenced_epoch(self, job: str) -> int | None:
        return await self.call(LocalLog.fenced_epoch, job)

    async def advance_fence(self, job: str, epoch: int, *, in_place: bool = False,
                            gone: Collection[int] = ()) -> None:
        """Make ``epoch`` current; `JobModelError` unless it is above the current one."""
        await self.call(LocalLog.advance_fence, job, epoch)

    async def check_fence(self, job: str, epoch: int) -> None:
        """`FencedError` unless ``epoch`` is the job's current epoch."""
        await self.call(LocalLog.check_fence, job, epoch)

    async def acquire_lease(self, job: str, token: str, holder: str, ttl_ms: int,
                            now_ms: int, replacing: str | None = None
                            ) -> tuple[str, str, int] | None:
        """See `LocalLog.acquire_lease`."""
        return await self.call(LocalLog.acquire_lease, job, token, holder, ttl_ms, now_ms,
                               replacing)

    async def leases(self) -> dict[str, tuple[str, int]]:
        """See `LocalLog.leases`."""
        return await self.call(LocalLog.leases)

    async def release_lease(self, job: str, token: str) -> None:
        await self.call(LocalLog.release_lease, job, token)

    async def read_lease(self, job: str) -> tuple[str, int] | None:
        """See `LocalLog.read_lease`."""
        return await self.call(LocalLog.read_lease, job)

    async def compact(self, stream: str) -> int:
        counts = await self.partition_counts([stream])
        dropped = 0
        for partition in range(counts[stream]):
            dropped += await self.call(compact_partition, stream, partition)
        if dropped:
            await self.release_free_pages()
        return dropped

    async def apply_retention(self, stream: str, policy: RetentionPolicy,
                              now_ms: int | None = None) -> RetentionResult:
        """Delete ``stream``'s batches past ``policy`` (`framework.systems.local.retention`),
        then give the freed pages back to the file system."""
        result = await self.call(apply_retention, stream, policy, now_ms)
        if result.batches:
            await self.release_free_pages()
        return result

    async def release_free_pages(self) -> int:
        """Incremental vacuum: free pages of the file go back to the file system."""
        return await self.call(release_free_pages)

    async def retention_resets(self, job: str) -> list[RetentionReset]:
        """Where ``drop-unread`` retention moved ``job``'s readers forward."""
        return await self.call(read_resets, job)

    async def partition_bytes(self, stream: str) -> dict[int, int]:
        """Payload bytes on disk per partition of ``stream``."""
        return await self.call(partition_bytes, stream)


class LocalConsumer:
    """Reads assigned partitions of a `LocalSystem`: ``fetch`` on the system's connection
    thread, ``fetch_raw`` (a worker's loop) on the caller's thread with a connection of
    its own."""

    def __init__(self, system: LocalSystem) -> None:
        self._system = system
        self._reader: LocalLog | None = None  # `fetch_raw`'s connection, opened at first use
        self._positions: dict[Slot, int] = {}
        self._ssps: dict[Slot, SystemStreamPartition] = {}
        self._turn = 0
        self._generation = 0  # bumped by assign: a fetch in flight must not undo it
        self._closed = False
        self._counts: dict[str, int] = {}

    def assign(self, positions: Mapping[SystemStreamPartition, int]) -> None:
        self._generation += 1
        self._ssps = {(ssp.stream, ssp.partition): ssp for ssp in positions}
        self._positions = {(ssp.stream, ssp.partition): pos for ssp, pos in positions.items()}

    def expect_partition_counts(self, counts: Mapping[str, int]) -> None:
        self._counts = dict(counts)

    async def fetch(
        self, max_records: int = 1000, timeout_ms: int = 100
    ) -> Mapping[SystemStreamPartition, Sequence[Record]]:
        return await self._fetch(max_records, timeout_ms, False)  # type: ignore[return-value]

    async def fetch_raw(
        self, max_records: int = 1000, timeout_ms: int = 100
    ) -> Mapping[SystemStreamPartition, Sequence[FetchedRecord]]:
        """`fetch` as `FetchedColumns` (no object per record): the worker's path.

        Each read runs right here, on the event loop's thread, with this consumer's own
        connection (WAL: it never waits for a writer). Handed to the system's thread, a
        read ran while the loop processed the previous batch only in the slices the
        loop's hold on the GIL left it (SQLite gives the GIL up at every step), so the
        loop mostly waited for it anyway, and each hand-over cost both threads."""
        return await self._fetch(max_records, timeout_ms, True)

    async def _read(self, max_records: int, columns: bool) -> dict[Slot, Any]:
        args = (dict(self._positions), max_records, self._turn, self._counts, columns)
        if not columns:
            return await self._system.call(read_batch, *args)
        if self._reader is None:
            await self._system.start()  # the file exists, migrated, before a second opens it
            system = self._system
            self._reader = LocalLog(system.name, system.path, system.options)
        return read_batch(self._reader, *args)

    async def _fetch(
        self, max_records: int, timeout_ms: int, columns: bool
    ) -> Mapping[SystemStreamPartition, Sequence[FetchedRecord]]:
        if self._closed:
            raise RuntimeError("fetch on a closed LocalConsumer; create a new consumer")
        if not self._positions or max_records < 1:
            await asyncio.sleep(timeout_ms / 1000)
            return {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        backoff = _FIRST_BACKOFF_S
        while True:
            self._turn += 1
            generation = self._generation
            batch = await self._read(max_records, columns)
            if generation != self._generation:
                return {}
            if batch:
                for slot, records in batch.items():
                    self._positions[slot] = records[-1].offset + 1
                return {self._ssps[slot]: records for slot, records in batch.items()}
            left = deadline - loop.time()
            if left <= 0:
                return {}
            await asyncio.sleep(min(backoff, left))
            backoff = min(backoff * 2, _MAX_BACKOFF_S)

    async def close(self) -> None:
        self._closed = True
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()
