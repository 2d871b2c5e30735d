"""restore_store: which restore runs, what it reads, and that interrupted restores resume."""

from __future__ import annotations

import logging
import shutil
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from framework.errors import StoreError
from framework.stores import (
    ChangelogPosition,
    MemoryEngine,
    RestoreResult,
    RestoreStopped,
    RocksDBEngine,
    StoreEngine,
    changelog_reader,
    plan_restore,
    restore_store,
)
from framework.systems.base import Record

LOG = ("counts-changelog", 2)


def changelog(count: int, *, first: int = 0, keys: int | None = None) -> list[Record]:
    """Records ``first..first+count-1`` of partition 2; key ``k<offset % keys>``."""
    return [
        Record(2, offset, f"k{offset % (keys or count + first):04d}".encode(),
               f"v{offset}".encode(), 0)
        for offset in range(first, first + count)
    ]


class FakeChangelog:
    """Serves records like a consumer would, in batches; remembers where reads started."""

    def __init__(self, records: Sequence[Record], *, fetch_batch: int = 7,
                 fail_after_batches: int | None = None) -> None:
        self.records = list(records)
        self.fetch_batch = fetch_batch
        self.fail_after_batches = fail_after_batches
        self.starts: list[int] = []
        self.closed = False

    async def fetch(self, start: int) -> AsyncIterator[Sequence[Record]]:
        self.starts.append(start)
        wanted = [record for record in self.records if record.offset >= start]
        try:
            for number, first in enumerate(range(0, len(wanted), self.fetch_batch)):
                if number == self.fail_after_batches:
                    raise ConnectionError("broker went away")
                yield wanted[first:first + self.fetch_batch]
        finally:
            self.closed = True


class RecordingEngine(MemoryEngine):
    """A MemoryEngine that records the size and position of every batch written."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[tuple[int, int | None]] = []

    def write_batch(self, items: Mapping[bytes, bytes | None],
                    changelog: ChangelogPosition | None) -> None:
        self.batches.append((len(items), None if changelog is None else changelog.offset))
        super().write_batch(items, changelog)


@pytest.fixture
def rocks(tmp_path: Path) -> Iterator[RocksDBEngine]:
    engine = RocksDBEngine.open(tmp_path, "counts", "Partition 2")
    yield engine
    engine.close()


async def restore(engine: StoreEngine, source: FakeChangelog, *, end: int, oldest: int = 0,
                  batch_size: int = 10, log: tuple[str, int] = LOG) -> RestoreResult:
    return await restore_store(engine, changelog=log, fetch=source.fetch, end=end,
                               oldest=oldest, batch_size=batch_size, progress=None)


# -- the decision table ---------------------------------------------------------------

@pytest.mark.parametrize(
    ("position", "expected"),
    [
        (None, ("full", 10)),
        (ChangelogPosition("counts-changelog", 2, 50), ("none", 50)),
        (ChangelogPosition("counts-changelog", 2, 30), ("delta", 30)),
        (ChangelogPosition("counts-changelog", 2, 10), ("delta", 10)),
        (ChangelogPosition("counts-changelog", 2, 51), ("full", 10)),
        (ChangelogPosition("counts-changelog", 2, 9), ("full", 10)),
        (ChangelogPosition("counts-changelog", 1, 30), ("full", 10)),
        (ChangelogPosition("other-changelog", 2, 30), ("full", 10)),
    ],
)
def test_plan(position: ChangelogPosition | None, expected: tuple[str, int]) -> None:
    plan = plan_restore(position, LOG, oldest=10, end=50)
    assert (plan.mode, plan.start) == expected


# -- restores against RocksDB with a changelog served from memory ---------------------

async def test_a_new_store_is_restored_fully(rocks: RocksDBEngine) -> None:
    result = await restore(rocks, FakeChangelog(changelog(25)), end=25)
    assert (result.mode, result.records, result.start, result.end) == ("full", 25, 0, 25)
    assert rocks.count() == 25
    assert rocks.get(b"k0024") == b"v24"
    assert rocks.changelog_position() == ChangelogPosition("counts-changelog", 2, 25)


async def test_a_restore_logs_its_end_once_with_one_rate(
        rocks: RocksDBEngine, caplog: pytest.LogCaptureFixture) -> None:
    """The default progress (log lines when not on a terminal) and the restore's own
    summary: one line reports the completed restore, with the rate of the whole of it."""
    caplog.set_level(logging.INFO)
    await restore_store(rocks, changelog=LOG, fetch=FakeChangelog(changelog(2_000)).fetch,
                        end=2_000, oldest=0, batch_size=100, label="store 'counts'")
    rated = [r.getMessage() for r in caplog.records if "records/s" in r.getMessage()]
    assert [line.split(": ", 1)[1].split(" at ")[0] for line in rated[:3]] == [
        "500/2,000 records (25%)", "1,000/2,000 records (50%)", "1,500/2,000 records (75%)"]
    [end] = rated[3:]  # the completed restore: one line, one rate
    assert end.startswith("restore store 'counts': full restore applied 2,000 records in ")


async def test_a_store_at_the_end_restores_nothing(rocks: RocksDBEngine) -> None:
    await restore(rocks, FakeChangelog(changelog(25)), end=25)
    source = FakeChangelog(changelog(25))
    result = await restore(rocks, source, end=25)
    assert (result.mode, result.records, source.starts) == ("none", 0, [])


async def test_a_store_behind_restores_only_the_delta(rocks: RocksDBEngine) -> None:
    await restore(rocks, FakeChangelog(changelog(25)), end=25)
    source = FakeChangelog(changelog(40, keys=30))  # offsets 30..39 overwrite k0000..k0009
    result = await restore(rocks, source, end=40)
    assert (result.mode, result.records, source.starts) == ("delta", 15, [25])
    assert rocks.count() == 30
    assert (rocks.get(b"k0003"), rocks.get(b"k0029")) == (b"v33", b"v29")
    assert rocks.changelog_position() == ChangelogPosition("counts-changelog", 2, 40)


async def test_a_deleted_store_directory_is_restored_fully(tmp_path: Path) -> None:
    engine = RocksDBEngine.open(tmp_path, "counts", "Partition 2")
    await restore(engine, FakeChangelog(changelog(25)), end=25)
    engine.close()
    shutil.rmtree(engine.path)
    engine = RocksDBEngine.open(tmp_path, "counts", "Partition 2")
    result = await restore(engine, FakeChangelog(changelog(25)), end=25)
    assert (result.mode, result.records, engine.count()) == ("full", 25, 25)
    engine.close()


async def test_a_store_ahead_of_a_recreated_changelog_is_wiped_and_restored(
    rocks: RocksDBEngine,
) -> None:
    await restore(rocks, FakeChangelog(changelog(25)), end=25)
    recreated = [Record(2, offset, f"new{offset}".encode(), b"x", 0) for offset in range(5)]
    result = await restore(rocks, FakeChangelog(recreated), end=5)
    assert (result.mode, result.records) == ("full", 5)
    assert [key for key, _ in rocks.iterate()] == [b"new0", b"new1", b"new2", b"new3", b"new4"]


async def test_a_store_of_another_partition_is_wiped_and_restored(rocks: RocksDBEngine) -> None:
    await restore(rocks, FakeChangelog(changelog(25)), end=25, log=("counts-changelog", 1))
    result = await restore(rocks, FakeChangelog(changelog(25, keys=5)), end=25)
    assert (result.mode, result.records, rocks.count()) == ("full", 25, 5)
    assert rocks.changelog_position() == ChangelogPosition("counts-changelog", 2, 25)


async def test_a_store_behind_the_oldest_retained_offset_is_restored_fully(
    rocks: RocksDBEngine,
) -> None:
    await restore(rocks, FakeChangelog(changelog(10)), end=10)
    source = FakeChangelog(changelog(20, first=20))
    result = await restore(rocks, source, end=40, oldest=20)
    assert (result.mode, result.records, source.starts, rocks.count()) == ("full", 20, [20], 20)


async def test_an_interrupted_restore_resumes_from_its_last_batch(rocks: RocksDBEngine) -> None:
    failing = FakeChangelog(changelog(50), fetch_batch=7, fail_after_batches=4)
    with pytest.raises(ConnectionError):
        await restore(rocks, failing, end=50, batch_size=10)
    # 28 records were fetched; the two full write batches (offsets 0..19) were applied.
    assert rocks.changelog_position() == ChangelogPosition("counts-changelog", 2, 20)
    assert rocks.count() == 20
    assert not rocks.bulk_loading
    source = FakeChangelog(changelog(50))
    result = await restore(rocks, source, end=50)
    assert (result.mode, result.records, source.starts, rocks.count()) == ("delta", 30, [20], 50)


async def bulk_modes_seen(rocks: RocksDBEngine, *, bulk_from: int) -> list[bool]:
    """Restore 30 records (10 keys) into ``rocks``; whether it was in bulk mode at each batch."""
    modes: list[bool] = []
    source = FakeChangelog(changelog(30, keys=10))

    async def fetch(start: int) -> AsyncIterator[Sequence[Record]]:
        async for batch in source.fetch(start):
            modes.append(rocks.bulk_loading)
            yield batch

    await restore_store(rocks, changelog=LOG, fetch=fetch, end=30, oldest=0, batch_size=10,
                        progress=None, bulk_from=bulk_from)
    assert (rocks.get(b"k0003"), rocks.count()) == (b"v23", 10)
    assert rocks.changelog_position() == ChangelogPosition(*LOG, 30)
    return modes


async def test_a_stop_request_ends_the_restore_after_the_batch_in_flight(
        rocks: RocksDBEngine) -> None:
    """Asked to stop after 3 batches: exactly 30 records applied, then a delta of the rest."""
    asked: list[int] = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) > 3

    with pytest.raises(RestoreStopped, match=r"full restore of \[0, 100\) stopped at offset "
                       r"30 \(30 records applied\); the next start resumes with a delta"):
        await restore_store(rocks, changelog=LOG, fetch=FakeChangelog(changelog(100)).fetch,
                            end=100, oldest=0, batch_size=10, progress=None, stop=stop)
    assert rocks.changelog_position() == ChangelogPosition(*LOG, 30)
    assert rocks.count() == 30
    assert not rocks.bulk_loading
    result = await restore(rocks, FakeChangelog(changelog(100)), end=100)
    assert (result.mode, result.records, result.start, rocks.count()) == ("delta", 70, 30, 100)


async def test_a_stop_before_the_first_batch_applies_nothing(rocks: RocksDBEngine) -> None:
    with pytest.raises(RestoreStopped) as stopped:
        await restore_store(rocks, changelog=LOG, fetch=FakeChangelog(changelog(50)).fetch,
                            end=50, oldest=0, batch_size=10, progress=None, stop=lambda: True)
    assert (stopped.value.position, stopped.value.applied) == (0, 0)
    assert rocks.count() == 0
    result = await restore(rocks, FakeChangelog(changelog(50)), end=50)
    assert (result.mode, result.records) == ("full", 50)


async def test_a_restore_reads_many_records_per_request_even_with_tiny_write_batches(
        tmp_path: Path) -> None:
    """``store_restore_batch = 1`` writes one record per batch but reads in large ranges."""
    from framework.systems.base import ProducerRecord
    from framework.systems.local.system import LocalSystem
    from groupers import SystemStreamPartition

    system = LocalSystem("local", tmp_path / "log")
    stream = "job-counts-changelog"
    await system.create_stream(stream, 1, compacted=True)
    await system.produce([ProducerRecord(stream, f"k{i}".encode(), b"v", partition=0)
                          for i in range(500)])
    requests: list[tuple[int, int]] = []
    original = system.read_columns

    async def counting(stream: str, partition: int, start: int, end: int, limit: int) -> object:
        requests.append((start, limit))
        return await original(stream, partition, start, end, limit)

    system.read_columns = counting  # type: ignore[method-assign]
    engine = RecordingEngine()
    try:
        result = await restore_store(
            engine, changelog=(stream, 0), oldest=0, end=500, batch_size=1, progress=None,
            fetch=changelog_reader(system, SystemStreamPartition("local", stream, 0), 500,
                                   batch_size=1))
    finally:
        await system.close()
    assert (result.mode, result.records, len(engine.batches)) == ("full", 500, 500)
    assert requests == [(0, 10_000)]


async def test_rocksdb_restores_write_in_bulk_mode_and_end_in_normal_mode(
    rocks: RocksDBEngine,
) -> None:
    modes = await bulk_modes_seen(rocks, bulk_from=30)
    assert modes and all(modes)
    assert not rocks.bulk_loading


async def test_a_restore_below_the_bulk_threshold_skips_bulk_mode(rocks: RocksDBEngine) -> None:
    modes = await bulk_modes_seen(rocks, bulk_from=31)
    assert modes and not any(modes)


# -- how records are applied ----------------------------------------------------------

async def test_records_are_written_in_batches_with_the_advancing_position() -> None:
    engine = RecordingEngine()
    await restore(engine, FakeChangelog(changelog(25), fetch_batch=7), end=25, batch_size=10)
    assert engine.batches == [(10, 10), (10, 20), (5, 25)]


async def test_compaction_gaps_and_an_empty_tail_still_end_at_the_end_offset() -> None:
    engine = RecordingEngine()
    kept = [record for record in changelog(30) if record.offset % 3 == 0]  # 0, 3, ..., 27
    result = await restore(engine, FakeChangelog(kept), end=30, batch_size=4)
    assert result.records == 10
    assert engine.batches == [(4, 10), (4, 22), (2, 30)]


async def test_an_empty_changelog_still_records_its_position() -> None:
    """A brand-new store of an empty changelog: nothing to restore, position recorded."""
    engine = RecordingEngine()
    result = await restore(engine, FakeChangelog([]), end=0)
    assert (result.mode, result.records, engine.batches) == ("none", 0, [(0, 0)])
    assert engine.changelog_position() == ChangelogPosition("counts-changelog", 2, 0)


async def test_tombstones_delete_and_later_records_win() -> None:
    engine = MemoryEngine()
    records = [
        Record(2, 0, b"a", b"1", 0), Record(2, 1, b"b", b"1", 0), Record(2, 2, b"a", b"2", 0),
        Record(2, 3, b"b", None, 0), Record(2, 4, b"c", b"1", 0), Record(2, 5, b"c", None, 0),
        Record(2, 6, b"c", b"3", 0),
    ]
    await restore(engine, FakeChangelog(records), end=7, batch_size=100)
    assert list(engine.iterate()) == [(b"a", b"2"), (b"c", b"3")]


async def test_records_at_or_past_the_end_are_ignored_and_the_reader_closed() -> None:
    engine = MemoryEngine()
    source = FakeChangelog(changelog(30))
    result = await restore(engine, source, end=12)
    assert (result.records, engine.count(), source.closed) == (12, 12, True)
    assert engine.changelog_position() == ChangelogPosition("counts-changelog", 2, 12)


async def test_a_record_without_a_key_stops_the_restore() -> None:
    records = [*changelog(3), Record(2, 3, None, b"x", 0)]
    with pytest.raises(StoreError, match="counts-changelog partition 2 has a record without a "
                                         "key at offset 3"):
        await restore(MemoryEngine(), FakeChangelog(records), end=4)


async def test_progress_counts_offsets_up_to_the_end() -> None:
    reports: list[tuple[str, int | None, list[int], bool]] = []

    class Recorder:
        def __init__(self, description: str, total: int | None) -> None:
            self.entry = (description, total, [], False)
            reports.append(self.entry)

        def advance(self, amount: int) -> None:
            self.entry[2].append(amount)

        def close(self) -> None:
            reports[-1] = (*self.entry[:3], True)

    engine = MemoryEngine()
    engine.write_batch({}, ChangelogPosition("counts-changelog", 2, 5))
    kept = [record for record in changelog(30) if record.offset >= 5 and record.offset != 29]
    await restore_store(engine, changelog=LOG, fetch=FakeChangelog(kept).fetch, end=30, oldest=0,
                        batch_size=10, progress=Recorder, label="store counts of Partition 2")
    assert reports == [("restore store counts of Partition 2", 25, [10, 10, 5], True)]


# -- from a real changelog: the local system --------------------------------------------

async def test_restore_from_the_local_system(tmp_path: Path) -> None:
    from framework.systems.base import ProducerRecord
    from framework.systems.local.system import LocalSystem
    from groupers import SystemStreamPartition

    system = LocalSystem("local", tmp_path / "log")
    stream = "job-counts-changelog"
    ssp = SystemStreamPartition("local", stream, 1)
    await system.create_stream(stream, 2, compacted=True)
    try:
        await system.produce(
            [ProducerRecord(stream, f"k{i % 40:03d}".encode(), f"v{i}".encode(), partition=1)
             for i in range(100)]
            + [ProducerRecord(stream, b"k000", None, partition=1),
               ProducerRecord(stream, b"other", b"x", partition=0)])

        async def restore_local(engine: StoreEngine) -> tuple[str, int, int]:
            ranges = (await system.offsets(stream))[1]
            result = await restore_store(
                engine, changelog=(stream, 1), oldest=ranges.oldest, end=ranges.end,
                fetch=changelog_reader(system, ssp, ranges.end, batch_size=16),
                batch_size=32, progress=None)
            return result.mode, result.records, engine.count()

        engine = RocksDBEngine.open(tmp_path, "counts", "Partition 1")
        assert await restore_local(engine) == ("full", 101, 39)
        assert (engine.get(b"k001"), engine.get(b"k000")) == (b"v81", None)

        await system.produce([ProducerRecord(stream, f"k{i:03d}".encode(), b"new", partition=1)
                              for i in range(5)])
        assert await restore_local(engine) == ("delta", 5, 40)
        assert await restore_local(engine) == ("none", 0, 40)

        engine.close()
        shutil.rmtree(engine.path)
        await system.compact(stream)
        engine = RocksDBEngine.open(tmp_path, "counts", "Partition 1")
        # Compaction kept the latest record per key: 40 keys, the k000 tombstone superseded.
        assert await restore_local(engine) == ("full", 40, 40)
        assert engine.changelog_position() == ChangelogPosition(stream, 1, 106)
        engine.close()
    finally:
        await system.close()


async def test_read_ahead_lets_a_cancel_through_while_it_drops_its_prefetch() -> None:
    """A task cancelled while `read_ahead` waits for its abandoned prefetch to end is
    cancelled, not resumed as if nothing happened (the cancel is not swallowed)."""
    import asyncio

    from framework.stores.restore import read_ahead

    prefetching, cleaning, release = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def source() -> AsyncIterator[list[int]]:
        yield [1]
        try:
            prefetching.set()
            await asyncio.Event().wait()  # the prefetch of the next batch never arrives
        except asyncio.CancelledError:
            cleaning.set()  # a read that ends its I/O before honouring the cancel
            await release.wait()
            raise
        yield [2]

    async def consume() -> str:
        batches = read_ahead(source())
        assert await anext(batches) == [1]
        await prefetching.wait()
        await batches.aclose()  # drops the prefetch: cancels it and waits for it to end
        return "carried on"

    consumer = asyncio.create_task(consume())
    await cleaning.wait()
    consumer.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await consumer
    assert consumer.cancelled()
