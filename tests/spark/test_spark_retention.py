"""The ``sampan`` DataSource after retention moved the oldest offset of the local log:
batch reads and streaming queries (whose saved position may now be gone) read exactly the
records still held."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sparkjobs import on_system, wordcount_job

from framework.config import load_config
from framework.systems.base import ProducerRecord, RecordPosition, System
from framework.systems.local.retention import RetentionPolicy
from framework.systems.local.system import LocalSystem

OLD, NEW = 1_000, 10**13  # record timestamps: past retention, and far from it
Row = tuple[int, int, str, str]


def produce(job: Path, words: list[str], seq: int, timestamp: int) -> list[Row]:
    """One produce call per word (a batch each): (partition, offset, key, value) rows."""
    async def go(system: System) -> list[RecordPosition]:
        landed: list[RecordPosition] = []
        for n, word in enumerate(words):
            landed += await system.produce([ProducerRecord(
                "words", word.encode(), json.dumps({"seq": seq + n}).encode(),
                timestamp=timestamp)])
        return landed
    positions = on_system(load_config(job), go)
    return [(p.partition, p.offset, word, f'{{"seq":{seq + n}}}')
            for n, (word, p) in enumerate(zip(words, positions, strict=True))]


def trim(job: Path) -> dict[int, int]:
    """Retention of 1 ms at a time past `OLD`: every batch stamped `OLD` goes."""
    async def go(system: System) -> dict[int, int]:
        assert isinstance(system, LocalSystem)
        await system.apply_retention("words", RetentionPolicy(retention_ms=1), now_ms=OLD * 2)
        return {p: r.oldest for p, r in (await system.offsets("words")).items()}
    return on_system(load_config(job), go)


@pytest.fixture
def job(tmp_path: Path) -> Path:
    path = wordcount_job(tmp_path / "wordcount")
    on_system(load_config(path), lambda system: system.create_stream("words", 2))
    return path


def _rows(frame: Any) -> list[Row]:
    return sorted((r.partition, r.offset, r.key, r.value) for r in frame.collect())


def test_a_batch_read_gets_exactly_the_retained_records(spark: Any, job: Path) -> None:
    produce(job, [f"w{n}" for n in range(8)], 0, OLD)
    kept = produce(job, [f"w{n}" for n in range(8)], 100, NEW)
    oldest = trim(job)
    assert min(oldest.values()) > 0
    frame = spark.read.format("sampan").option("job", str(job)).option(
        "stream", "local.words").load()
    assert _rows(frame) == sorted(kept)


def test_a_streaming_query_behind_the_oldest_offset_reads_what_is_retained(
        spark: Any, job: Path, tmp_path: Path) -> None:
    def run_once() -> list[Row]:
        seen: list[Row] = []
        query = (spark.readStream.format("sampan").option("job", str(job))
                 .option("stream", "local.words").load()
                 .select("partition", "offset", "key", "value")
                 .writeStream.foreachBatch(lambda batch, _: seen.extend(
                     (r.partition, r.offset, r.key, r.value) for r in batch.collect()))
                 .option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        return sorted(seen)

    first = produce(job, [f"w{n}" for n in range(6)], 0, OLD)
    assert run_once() == sorted(first)
    unread = produce(job, [f"w{n}" for n in range(6)], 10, OLD)  # retention takes it unread
    kept = produce(job, [f"w{n}" for n in range(6)], 20, NEW)
    oldest = trim(job)
    assert all(offset > position for partition, position, *_ in unread
               for p, offset in oldest.items() if p == partition)
    assert run_once() == sorted(kept)  # from a saved position the log no longer holds
