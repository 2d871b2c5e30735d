"""Bring a store engine up to the end of its changelog partition before a task starts.

The engine's own changelog position (written atomically with its data) decides how:

========================================================  =======  ====================
local position                                            mode     reads
========================================================  =======  ====================
same changelog (stream, partition) and ``== end``         none     nothing
same changelog and ``oldest <= position < end``           delta    ``[position, end)``
missing (new or deleted store directory)                  full     ``[oldest, end)``
another stream or partition                               full     ``[oldest, end)``
ahead of ``end`` (another changelog of that name)         full     ``[oldest, end)``
behind ``oldest`` (records it needs were deleted)         full     ``[oldest, end)``
========================================================  =======  ====================

A full restore wipes the engine first. Records are applied in write batches of
``batch_size`` together with the advancing position, so a restore that is interrupted
(crash, exception, or a stop request: `RestoreStopped`) resumes as a delta from the last
applied batch.

Fault injection for tests and drills: ``SAMPAN_FAULT_RESTORE_BATCH_DELAY_MS=N`` makes every
batch of a restore wait N ms after it is written, so a restore lasts at least
``records / batch_size * N`` ms on any machine (a test can watch it mid-way). Unset (the
default) it does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from bisect import bisect_left
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Literal, TypeVar, cast

from framework.errors import StoreError
from framework.progress import Progress, ProgressFactory, Reporter
from framework.stores.base import BulkLoadable, ChangelogPosition, PairWriter, StoreEngine
from framework.systems.base import ColumnReader, Record, System
from framework.systems.reading import read_columns_range
from groupers import SystemStreamPartition

__all__ = [
    "BULK_FROM",
    "FAULT_BATCH_DELAY_ENV",
    "READ_BATCH",
    "Fetch",
    "RecordColumns",
    "RestoreMode",
    "RestorePlan",
    "RestoreResult",
    "RestoreStopped",
    "changelog_reader",
    "plan_restore",
    "restore_store",
]

log = logging.getLogger(__name__)

FAULT_BATCH_DELAY_ENV = "SAMPAN_FAULT_RESTORE_BATCH_DELAY_MS"

RestoreMode = Literal["none", "delta", "full"]

@dataclass(frozen=True, slots=True)
class RecordColumns:
    """A batch of changelog records as parallel lists, in offset order: what a reader that
    can skip building `Record` objects (the local log) yields."""

    offsets: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]

    def __len__(self) -> int:
        return len(self.offsets)


_Batch = TypeVar("_Batch")

BULK_FROM = 20_000
"""Smallest restore range written in bulk mode: entering and leaving it reopens a RocksDB
store (~15 ms), which a restore repays only from about 10k records on."""

READ_BATCH = 10_000
"""Fewest changelog records read per request, whatever the write batch: reading one record
per request made small write batches (``store_restore_batch = 1``) ~10x slower."""

Fetch = Callable[[int], AsyncIterator[Sequence[Record] | RecordColumns]]
"""Given a start offset, yields batches of every retained changelog record from there up
to the restore's ``end`` in offset order (records at or past ``end`` are ignored)."""


class RestoreStopped(Exception):
    """A restore ended early because its worker was asked to stop (SIGTERM, expansion).

    Everything applied so far is in the store with its changelog position, so the next
    start resumes with a delta restore from ``position``.
    """

    def __init__(self, label: str, mode: RestoreMode, start: int, position: int, end: int,
                 applied: int) -> None:
        super().__init__(
            f"restore {label}: {mode} restore of [{start}, {end}) stopped at offset {position} "
            f"({applied:,} records applied); the next start resumes with a delta restore")
        self.label = label
        self.mode = mode
        self.position = position
        self.end = end
        self.applied = applied


@dataclass(frozen=True, slots=True)
class RestorePlan:
    """What a restore will do and why (the ``reason`` is for logs)."""

    mode: RestoreMode
    start: int
    reason: str


@dataclass(frozen=True, slots=True)
class RestoreResult:
    """What a restore did: its mode, how many changelog records it applied, from where."""

    mode: RestoreMode
    records: int
    start: int = 0
    end: int = 0


def plan_restore(
    position: ChangelogPosition | None, changelog: tuple[str, int], *, oldest: int, end: int
) -> RestorePlan:
    """Decide the restore of a store at ``position`` from ``changelog`` holding [oldest, end).

        >>> plan_restore(ChangelogPosition("log", 3, 40), ("log", 3), oldest=0, end=50)
        RestorePlan(mode='delta', start=40, reason='local state is at offset 40 of 50')
    """
    stream, partition = changelog
    if position is None:
        return RestorePlan("full", oldest, "no local state")
    if (position.stream, position.partition) != (stream, partition):
        return RestorePlan(
            "full",
            oldest,
            f"local state came from {position.stream} partition {position.partition}",
        )
    if position.offset > end:
        return RestorePlan(
            "full", oldest, f"local state is at offset {position.offset}, past the end {end}: "
            f"it was written from another changelog of this name (another job with the same "
            f"job.name sharing this state folder, or the changelog was deleted and created "
            f"again)"
        )
    if position.offset < oldest:
        return RestorePlan(
            "full", oldest, f"local state is at offset {position.offset}, before the oldest "
            f"retained offset {oldest}"
        )
    if position.offset == end:
        return RestorePlan("none", end, "local state is up to date")
    return RestorePlan("delta", position.offset, f"local state is at offset {position.offset} "
                       f"of {end}")


async def restore_store(
    engine: StoreEngine,
    *,
    changelog: tuple[str, int],
    fetch: Fetch,
    end: int,
    oldest: int,
    batch_size: int = 10_000,
    progress: ProgressFactory | None = Progress,
    label: str | None = None,
    bulk_from: int = BULK_FROM,
    stop: Callable[[], bool] | None = None,
) -> RestoreResult:
    """Restore ``engine`` from its changelog partition up to ``end`` (see the module table).

    ``changelog`` is ``(stream, partition)``; ``oldest``/``end`` are that partition's
    oldest retained offset and end offset; ``fetch(start)`` reads it (see `Fetch`, and
    `changelog_reader` for a System). ``label`` names the store and task in logs. A range
    of at least ``bulk_from`` offsets is written in the engine's bulk mode, if it has one.
    ``stop`` is asked between write batches; once it answers True the restore ends with
    `RestoreStopped` after the batch in flight is written (nothing applied is lost).
    """
    if not 0 <= oldest <= end:
        raise StoreError(f"restore of {label or changelog}: invalid changelog range "
                         f"[{oldest}, {end}); the oldest offset must not exceed the end")
    if batch_size < 1:
        raise StoreError(f"restore of {label or changelog}: batch_size must be >= 1")
    stream, partition = changelog
    label = label or f"changelog {stream} partition {partition}"
    plan = plan_restore(engine.changelog_position(), changelog, oldest=oldest, end=end)
    if plan.mode == "none":
        log.info("restore %s: nothing to do (%s)", label, plan.reason)
        return RestoreResult("none", 0, end, end)
    if plan.mode == "full" and plan.start == end and engine.changelog_position() is None:
        # A brand-new store of an empty changelog: record where it stands, nothing to read.
        engine.write_batch({}, ChangelogPosition(stream, partition, end))
        log.info("restore %s: nothing to restore (the changelog has no records yet)", label)
        return RestoreResult("none", 0, end, end)
    log.info("restore %s: %s restore of [%d, %d) because %s", label, plan.mode, plan.start, end,
             plan.reason)
    mode: AbstractContextManager[None] = contextlib.nullcontext()
    if isinstance(engine, BulkLoadable) and end - plan.start >= bulk_from:
        mode = engine.bulk_load()  # the engine's faster write mode
    started = time.monotonic()
    with mode:
        if plan.mode == "full":
            engine.wipe()
        applier = await _apply(engine, changelog, fetch, plan.start, end, batch_size,
                               progress, label, stop)
    if applier.stopped:
        raise RestoreStopped(label, plan.mode, plan.start, applier.position, end,
                             applier.records)
    elapsed = time.monotonic() - started
    log.info("restore %s: %s restore applied %s records in %.2f s (%s records/s)", label,
             plan.mode, f"{applier.records:,}", elapsed,
             f"{applier.records / elapsed if elapsed else 0.0:,.0f}")
    return RestoreResult(plan.mode, applier.records, plan.start, end)


async def _apply(
    engine: StoreEngine, changelog: tuple[str, int], fetch: Fetch, start: int, end: int,
    batch_size: int, progress: ProgressFactory | None, label: str,
    stop: Callable[[], bool] | None = None,
) -> _Applier:
    """Read ``[start, end)`` with ``fetch`` and write it to ``engine`` in batches."""
    reporter = progress(f"restore {label}", end - start) if progress is not None else None
    applier = _Applier(engine, changelog[0], changelog[1], start, batch_size, reporter, stop)
    batches = fetch(start)
    try:
        async for batch in batches:
            if batch and not await applier.add(batch, end):
                break
            if applier.stopped:
                break
        if not applier.stopped:
            await applier.finish(end)
    finally:
        await applier.close()
        aclose = getattr(batches, "aclose", None)
        if aclose is not None:
            await aclose()  # release the reader (e.g. its consumer) now, not at GC
        if reporter is not None:
            reporter.close()
    return applier


class _Applier:
    """Collects changelog records and writes them in batches with the advancing position."""

    def __init__(
        self,
        engine: StoreEngine,
        stream: str,
        partition: int,
        start: int,
        batch_size: int,
        reporter: Reporter | None,
        stop: Callable[[], bool] | None = None,
    ) -> None:
        self._engine = engine
        self._stop = stop
        self.stopped = False
        self._stream = stream
        self._partition = partition
        self._batch_size = batch_size
        self._reporter = reporter
        self._offsets: list[int] = []
        self._keys: list[bytes | None] = []
        self._values: list[bytes | None] = []
        self.position = start
        self.records = 0
        self._written = False
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="sampan-restore")
        self._inflight: asyncio.Future[None] | None = None
        self._delay_s = int(os.environ.get(FAULT_BATCH_DELAY_ENV) or 0) / 1000

    async def add(self, batch: Sequence[Record] | RecordColumns, end: int) -> bool:
        """Queue ``batch``; False once a record at or past ``end`` shows the range is done."""
        if isinstance(batch, RecordColumns):
            offsets, keys, values = batch.offsets, batch.keys, batch.values
        else:
            offsets = [record.offset for record in batch]
            keys = [record.key for record in batch]
            values = [record.value for record in batch]
        more = True
        if offsets[-1] >= end:
            cut = bisect_left(offsets, end)
            offsets, keys, values = offsets[:cut], keys[:cut], values[:cut]
            more = False
        self._offsets.extend(offsets)
        self._keys.extend(keys)
        self._values.extend(values)
        size = self._batch_size
        first = 0
        while len(self._offsets) - first >= size:
            if self._stop is not None and self._stop():
                self.stopped = True
                break
            await self._write(first, first + size, self._offsets[first + size - 1] + 1)
            first += size
        if first:
            del self._offsets[:first], self._keys[:first], self._values[:first]
        return more

    async def finish(self, end: int) -> None:
        """Write what is left with the final position ``end`` (always at least one batch, so
        a restore of an empty changelog still records where the store stands)."""
        if self._offsets or self.position != end or not self._written:
            await self._write(0, len(self._offsets), end)
            self._offsets, self._keys, self._values = [], [], []
        await self._settle()

    async def close(self) -> None:
        """Wait for the write in flight (errors included) and release the writer thread."""
        try:
            await self._settle()
        finally:
            self._writer.shutdown(wait=True)

    async def _settle(self) -> None:
        inflight, self._inflight = self._inflight, None
        if inflight is not None:
            await inflight

    async def _write(self, lo: int, hi: int, position: int) -> None:
        keys = self._keys[lo:hi]
        if None in keys:
            bad = self._offsets[lo + keys.index(None)]
            raise StoreError(
                f"changelog {self._stream} partition {self._partition} has a record without "
                f"a key at offset {bad}; only keyed records can be restored — was "
                f"something other than sampan writing to this changelog?"
            )
        keyed = cast(list[bytes], keys)  # no None: checked above
        values = self._values[lo:hi]
        changelog = ChangelogPosition(self._stream, self._partition, position)
        if isinstance(self._engine, PairWriter):  # puts applied in order need no dict
            call = functools.partial(self._engine.write_pairs, keyed, values, changelog)
        else:
            # A dict keeps the latest value per key, as replaying the log in order would.
            call = functools.partial(self._engine.write_batch, dict(
                zip(keyed, values, strict=True)), changelog)
        # One write in flight, in order, on the writer thread (RocksDB releases the GIL):
        # the next batch is read and prepared meanwhile.
        await self._settle()
        self._inflight = asyncio.get_running_loop().run_in_executor(self._writer, call)
        self._written = True
        self.records += hi - lo
        if self._reporter is not None:
            self._reporter.advance(position - self.position)
        self.position = position
        if self._delay_s:
            await asyncio.sleep(self._delay_s)


def changelog_reader(
    system: System, ssp: SystemStreamPartition, end: int, *, batch_size: int = 10_000
) -> Fetch:
    """A `Fetch` reading ``ssp`` of ``system`` up to ``end``, for `restore_store`, as
    plain columns: the local log's `ColumnReader`, else the system's consumer through
    `framework.systems.reading.read_columns_range` (Kafka: no `Record` per changelog
    record), which also stops correctly when compaction removed the tail of the range.
    """

    size = max(batch_size, READ_BATCH)

    def fetch(start: int) -> AsyncIterator[Sequence[Record] | RecordColumns]:
        if isinstance(system, ColumnReader):  # the local log: plain columns, no Records
            return read_ahead(_columns(system.read_columns, ssp, start, end, size))
        return read_ahead(_consumed_columns(system, ssp, start, end, size))

    return fetch


async def _columns(
    read_columns: Callable[..., Awaitable[tuple[list[int], list[bytes | None],
                                                list[bytes | None]]]],
    ssp: SystemStreamPartition, start: int, end: int, batch_size: int,
) -> AsyncIterator[RecordColumns]:
    position = start
    while position < end:
        offsets, keys, values = await read_columns(ssp.stream, ssp.partition, position, end,
                                                   batch_size)
        if not offsets:
            return  # compaction removed the rest of the range
        yield RecordColumns(offsets, keys, values)
        position = offsets[-1] + 1


async def _consumed_columns(
    system: System, ssp: SystemStreamPartition, start: int, end: int, batch_size: int,
) -> AsyncIterator[RecordColumns]:
    async for offsets, keys, values in read_columns_range(system, ssp, start, end,
                                                          batch_size):
        yield RecordColumns(offsets, keys, values)


async def read_ahead(source: AsyncIterator[_Batch]) -> AsyncIterator[_Batch]:
    """Yield ``source``'s batches while already fetching the next one, so reading the
    changelog (a system's I/O thread or socket) overlaps writing the store."""
    step = source.__anext__
    upcoming: asyncio.Future[_Batch] = asyncio.ensure_future(step())
    try:
        while True:
            try:
                batch = await upcoming
            except StopAsyncIteration:
                return
            upcoming = asyncio.ensure_future(step())
            yield batch
    finally:
        if not upcoming.done():
            upcoming.cancel()
        await asyncio.wait([upcoming])  # a cancel of this task propagates from here
        if not upcoming.cancelled():
            upcoming.exception()  # the prefetch's outcome is not wanted (nor its error)
        aclose = getattr(source, "aclose", None)
        if aclose is not None:
            await aclose()
