"""Retention on the real local log: whole batches go, readers hold them (or are reset and
told), the file shrinks, and files of schema 4 become incremental-vacuum files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from framework.systems.base import Checkpoint, CommitRequest, ProducerRecord
from framework.systems.local import retention
from framework.systems.local.retention import RetentionPolicy
from framework.systems.local.schema import SCHEMA_VERSION, LocalOptions, connect
from framework.systems.local.system import LocalSystem
from groupers import SystemStreamPartition as SSP

VALUE = b"v" * 1000


async def fill(system: LocalSystem, partitions: int, batches: int, per_batch: int = 10,
               timestamp: int | None = None) -> None:
    """``batches`` produce calls of ``per_batch`` records into every partition: one
    batch each, values ``p<partition>-<offset>`` padded to ~1 KB."""
    ends = {p: span.end for p, span in (await system.offsets("events")).items()}
    for b in range(batches):
        await system.produce([
            ProducerRecord("events", b"k", b"%d-%d-" % (p, ends[p] + b * per_batch + i)
                           + VALUE, partition=p, timestamp=timestamp)
            for p in range(partitions) for i in range(per_batch)])


async def every_record(system: LocalSystem, partition: int) -> list[tuple[int, bytes]]:
    """(offset, value) of every record left in ``partition``, read through a consumer."""
    span = (await system.offsets("events"))[partition]
    consumer = system.consumer()
    consumer.assign({SSP("local", "events", partition): span.oldest})
    found: list[tuple[int, bytes]] = []
    while len(found) < span.end - span.oldest:
        batch = await consumer.fetch(max_records=10_000)
        found += [(r.offset, r.value or b"") for rs in batch.values() for r in rs]
    await consumer.close()
    return found


def expected(partition: int, start: int, end: int) -> list[tuple[int, bytes]]:
    return [(o, b"%d-%d-" % (partition, o) + VALUE) for o in range(start, end)]


async def checkpoint(system: LocalSystem, job: str, task: str,
                     offsets: dict[int, int]) -> None:
    await system.commit(CommitRequest(job=job, epoch=1, records=[], checkpoints=[Checkpoint(
        task, 1, {SSP("local", "events", p): o for p, o in offsets.items()})]))


def file_pages(path: Path) -> int:
    conn = sqlite3.connect(path / "log.sqlite3")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages: int = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.close()
    return pages


async def test_bytes_retention_deletes_whole_batches_oldest_first_and_shrinks_the_file(
        tmp_path: Path) -> None:
    system = LocalSystem("local", tmp_path)
    await system.create_stream("events", 2)
    await fill(system, 2, 40)  # 40 batches of 10 records (~10 KB) per partition
    before = file_pages(tmp_path)
    result = await system.apply_retention("events", RetentionPolicy(retention_bytes=50_000))
    # A batch is ~10.2 KB: four of them stay under the bound, five would not.
    assert result.batches == 2 * 36 and result.records == 720 and not result.resets
    sizes = await system.partition_bytes("events")
    assert all(40_000 < size <= 50_000 for size in sizes.values())
    spans = await system.offsets("events")
    assert {p: (s.oldest, s.end) for p, s in spans.items()} == {0: (360, 400), 1: (360, 400)}
    for p in range(2):
        assert await every_record(system, p) == expected(p, 360, 400)
    # A reader whose position was deleted (a worker fetching, raw or not) gets the
    # oldest retained records on.
    consumer = system.consumer()
    consumer.assign({SSP("local", "events", 0): 5})
    raw = await consumer.fetch_raw(max_records=10_000)
    columns = raw[SSP("local", "events", 0)]
    assert list(columns.offsets) == list(range(360, 400))  # type: ignore[attr-defined]
    consumer.assign({SSP("local", "events", 0): 5})
    fetched = await consumer.fetch(max_records=10_000)
    assert [(r.offset, r.value) for r in fetched[SSP("local", "events", 0)]] == expected(
        0, 360, 400)
    await consumer.close()
    assert file_pages(tmp_path) < before / 4  # the pages went back to the file system
    await fill(system, 2, 1)  # offsets carry on, never reused
    assert (await system.offsets("events"))[0].end == 410
    await system.close()


async def test_time_retention_compares_each_batchs_newest_timestamp(tmp_path: Path) -> None:
    system = LocalSystem("local", tmp_path)
    await system.create_stream("events", 1)
    await fill(system, 1, 3, timestamp=1_000)
    await fill(system, 1, 2, timestamp=5_000)
    policy = RetentionPolicy(retention_ms=2_000)
    assert (await system.apply_retention("events", policy, now_ms=2_999)).batches == 0
    assert (await system.apply_retention("events", policy, now_ms=3_000)).batches == 3
    assert await every_record(system, 0) == expected(0, 30, 50)
    assert (await system.apply_retention("events", policy, now_ms=7_000)).batches == 2
    span = (await system.offsets("events"))[0]
    assert (span.oldest, span.end) == (50, 50)  # nothing left: oldest is the end
    await system.close()


async def test_a_reader_holds_what_it_has_not_committed_until_it_commits_past_it(
        tmp_path: Path) -> None:
    system = LocalSystem("local", tmp_path)
    await system.create_stream("events", 2)
    await fill(system, 2, 10)
    # Job "a" read partition 0 up to 35 and has no checkpoint on partition 1 yet: it will
    # read partition 1 from 0, so nothing of partition 1 goes either.
    await checkpoint(system, "a", "Partition 0", {0: 35})
    policy = RetentionPolicy(retention_bytes=1)
    result = await system.apply_retention("events", policy)
    assert result.batches == 3 and not result.resets
    assert result.waiting_for == {("a", "Partition 0", 0), ("a", "", 1)}
    spans = await system.offsets("events")
    assert (spans[0].oldest, spans[1].oldest) == (30, 0)
    assert await every_record(system, 0) == expected(0, 30, 100)
    assert await every_record(system, 1) == expected(1, 0, 100)
    await checkpoint(system, "a", "Partition 1", {1: 100})
    await checkpoint(system, "a", "Partition 0", {0: 100})
    result = await system.apply_retention("events", policy)
    assert result.batches == 17 and not result.waiting_for
    await system.close()


async def test_drop_unread_resets_a_lagging_reader_and_records_it(tmp_path: Path) -> None:
    system = LocalSystem("local", tmp_path)
    await system.create_stream("events", 2)
    await fill(system, 2, 10)
    await checkpoint(system, "slow", "Partition 0", {0: 12})
    await checkpoint(system, "fast", "Partition 0", {0: 100})
    await checkpoint(system, "fast", "Partition 1", {1: 100})
    policy = RetentionPolicy(retention_bytes=30_000, mode="drop-unread")
    result = await system.apply_retention("events", policy, now_ms=123)
    assert result.batches == 16  # two batches (~20 KB) stay in each partition
    assert [(r.job, r.task, r.partition, r.from_offset, r.to_offset)
            for r in result.resets] == [("slow", "Partition 0", 0, 12, 80),
                                        ("slow", "", 1, 0, 80)]
    assert [(r.task, r.partition, r.from_offset, r.to_offset, r.reset_ms)
            for r in await system.retention_resets("slow")] == [
        ("Partition 0", 0, 12, 80, 123), ("", 1, 0, 80, 123)]
    assert await system.retention_resets("fast") == []
    moved = (await system.read_checkpoints("slow"))["Partition 0"]
    assert moved.inputs == {SSP("local", "events", 0): 80}
    assert await every_record(system, 0) == expected(0, 80, 100)
    assert "offsets 12–79 deleted by retention" in result.resets[0].describe()
    await system.close()


async def test_compacted_streams_are_left_to_compaction(tmp_path: Path) -> None:
    system = LocalSystem("local", tmp_path)
    await system.create_stream("events", 1, compacted=True)
    await fill(system, 1, 5)
    result = await system.apply_retention("events", RetentionPolicy(retention_bytes=1))
    assert result.batches == 0 and (await system.offsets("events"))[0].oldest == 0
    await system.close()


async def test_a_schema_4_file_becomes_an_incremental_vacuum_file_keeping_every_record(
        tmp_path: Path) -> None:
    system = LocalSystem("local", tmp_path)
    await system.create_stream("events", 1)
    await fill(system, 1, 20)
    await checkpoint(system, "a", "Partition 0", {0: 27})
    await system.close()
    raw = sqlite3.connect(tmp_path / "log.sqlite3", isolation_level=None)
    raw.execute("PRAGMA auto_vacuum = NONE")
    raw.execute("VACUUM")  # back to a file as schema 4 made it
    raw.execute("DROP TABLE retention_resets")
    raw.execute("PRAGMA user_version = 4")
    assert raw.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    raw.close()

    connect(tmp_path, LocalOptions()).close()
    raw = sqlite3.connect(tmp_path / "log.sqlite3")
    assert raw.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5
    raw.close()
    system = LocalSystem("local", tmp_path)
    assert await every_record(system, 0) == expected(0, 0, 200)
    assert (await system.read_checkpoints("a"))["Partition 0"].inputs == {
        SSP("local", "events", 0): 27}
    await system.apply_retention("events", RetentionPolicy(retention_bytes=1))
    assert (await system.offsets("events"))[0].oldest == 20
    await system.close()


async def test_only_the_newest_resets_of_a_job_are_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retention, "KEPT_RESETS", 2)
    system = LocalSystem("local", tmp_path)
    await system.create_stream("events", 1)
    policy = RetentionPolicy(retention_bytes=1, mode="drop-unread")
    for n in range(4):  # a job stuck at offset 0 (its checkpoint rewritten each pass)
        await checkpoint(system, "stuck", "Partition 0", {0: 0})
        await fill(system, 1, 1)
        await system.apply_retention("events", policy, now_ms=n)
    assert [(r.from_offset, r.to_offset, r.reset_ms)
            for r in await system.retention_resets("stuck")] == [(0, 30, 2), (0, 40, 3)]
    await system.close()


async def test_drop_unread_keeps_the_last_record_before_an_expansion_a_reader_must_reach(
        tmp_path: Path) -> None:
    system = LocalSystem("local", tmp_path)
    await system.create_stream("events", 1)
    await fill(system, 1, 10)  # offsets 0-99 under one partition
    await system.expand_stream("events", 2)  # recorded end of partition 0: 100
    await fill(system, 2, 3)
    await checkpoint(system, "slow", "Partition 0", {0: 5})
    policy = RetentionPolicy(retention_bytes=1, mode="drop-unread")
    await system.apply_retention("events", policy, now_ms=1)
    assert (await system.offsets("events"))[0].oldest == 90  # the batch holding 99 stays
    assert (await system.read_checkpoints("slow"))["Partition 0"].inputs == {
        SSP("local", "events", 0): 90}
    await checkpoint(system, "slow", "Partition 0", {0: 100})  # past the expansion
    await system.apply_retention("events", policy, now_ms=2)
    assert (await system.offsets("events"))[0].oldest == 130
    await system.close()
