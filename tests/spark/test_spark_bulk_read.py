"""The bulk read path (local range scans, Kafka Fetch requests) gives exactly what reading
record by record through the system's consumer gives: offsets, gaps, headers, nulls, and
range ends, across scan and fetch boundaries."""

from __future__ import annotations

import asyncio
import gc
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sparkjobs import on_system, wordcount_job

from framework.config import load_config
from framework.spark import kafka_fetch, records
from framework.spark.arrow_columns import arrow_schema, record_batch
from framework.spark.options import PartitionRange
from framework.spark.records import read_partition, records_to_columns
from framework.systems import open_system
from framework.systems.base import ProducerRecord, System
from framework.systems.reading import read_range
from groupers import SystemStreamPartition


def _mixed_records(stream: str, count: int, partition: int = 0) -> list[ProducerRecord]:
    """Keys repeat (for compaction); every 5th has no key, every 7th no value, every 3rd
    carries headers."""
    made = []
    for n in range(count):
        key = None if n % 5 == 4 else f"k{n % 6}".encode()
        value = None if n % 7 == 6 and key is not None else json.dumps({"n": n}).encode()
        headers = (("trace", str(n).encode()), ("empty", b"")) if n % 3 == 0 else ()
        made.append(ProducerRecord(stream, key, value, partition=partition,
                                   timestamp=1_000 + n, headers=headers))
    return made


LATEST = {f"k{n % 6}": n for n in range(60) if n % 5 != 4}
"""Offset of each key's latest record among 60 `_mixed_records` in one partition."""


def _rows(batches: list[pa.RecordBatch]) -> list[dict[str, Any]]:
    return [row for batch in batches for row in batch.to_pylist()]


async def _one_by_one(system: System, stream: str, partition: int, start: int, end: int,
                      raw: bool) -> list[dict[str, Any]]:
    """The reference: the system's consumer, record by record, rendered the same way."""
    fetched = []
    async for chunk in read_range(system, SystemStreamPartition(system.name, stream, partition),
                                  start, end, 3):
        fetched.extend(chunk)
    if not fetched:
        return []
    return record_batch(records_to_columns(fetched), partition, arrow_schema(raw),
                        None).to_pylist()


@pytest.fixture
def compacted_job(tmp_path: Path) -> Path:
    """``local.log`` (1 partition, compacted) holding 60 `_mixed_records`, then compacted."""
    path = wordcount_job(tmp_path / "wordcount")

    async def fill(system: Any) -> None:
        await system.create_stream("log", 1, compacted=True)
        await system.produce(_mixed_records("log", 60))
        assert await system.compact("log") > 0

    on_system(load_config(path), fill)
    return path


@pytest.mark.parametrize(("start", "end"), [(0, 60), (7, 41), (55, 60), (59, 100), (30, 31)])
def test_local_scans_give_the_consumers_records_across_boundaries(
        compacted_job: Path, monkeypatch: pytest.MonkeyPatch, start: int, end: int) -> None:
    monkeypatch.setattr(records, "FIRST_ROWS", 4)  # several scans, sized after the first
    monkeypatch.setattr(records, "MAX_ROWS", 5)
    config = load_config(compacted_job)

    got = _rows(list(read_partition(PartitionRange(str(compacted_job), "local.log", 0, start,
                                                   end, raw=True))))
    expected = on_system(config, lambda s: _one_by_one(s, "log", 0, start, end, raw=True))

    assert got == expected
    assert [r["offset"] for r in got] == sorted({r["offset"] for r in got})
    assert all(start <= r["offset"] < end for r in got)


def test_a_read_left_after_its_first_batch_closes_cleanly(
        compacted_job: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark may stop reading early (a limit): the scan already started for the next batch
    is cancelled, the system closed, and the garbage collector left running."""
    monkeypatch.setattr(records, "FIRST_ROWS", 4)
    batches = read_partition(PartitionRange(str(compacted_job), "local.log", 0, 0, 60, raw=True))

    first = next(batches)
    batches.close()

    assert first.num_rows == 4
    assert gc.isenabled()


def test_local_scans_skip_compacted_offsets(compacted_job: Path) -> None:
    offsets = [r["offset"] for r in _rows(list(read_partition(
        PartitionRange(str(compacted_job), "local.log", 0, 0, 60, raw=True))))]

    # Compaction keeps the latest record per key (k0..k5) and every keyless record.
    assert offsets == sorted([*LATEST.values(), *(n for n in range(60) if n % 5 == 4)])


def test_local_read_of_an_undeclared_stream_renders_bytes_nulls_and_headers(
        compacted_job: Path) -> None:
    rows = _rows(list(read_partition(PartitionRange(str(compacted_job), "local.log", 0, 0, 60,
                                                    raw=False))))

    by_offset = {r["offset"]: r for r in rows}
    assert by_offset[58] == {"key": "k4", "value": '{"n": 58}', "partition": 0, "offset": 58,
                             "timestamp": 1058, "headers": []}
    assert by_offset[54] == {"key": None, "value": '{"n": 54}', "partition": 0, "offset": 54,
                             "timestamp": 1054, "headers": [
                                 {"key": "trace", "value": b"54"}, {"key": "empty", "value": b""}]}
    tombstones = [r["offset"] for r in rows if r["value"] is None]
    assert tombstones == [n for n in sorted(LATEST.values()) if n % 7 == 6] == [48, 55]


def _kafka_job(tmp_path: Path, bootstrap: str) -> Path:
    path = tmp_path / "job.toml"
    path.write_text(f"""\
[job]
name = "bulk-read"
task = "wordcount_task:WordCountTask"
inputs = ["kafka.bulk"]

[systems.kafka]
type = "kafka"
bootstrap = "{bootstrap}"

[streams."kafka.bulk"]
partitions = 2
""")
    return path


def test_kafka_fetches_give_the_consumers_records_across_boundaries(
        kafka_broker: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_fetch, "FETCH_BYTES", 300)  # many small Fetch responses
    config = load_config(_kafka_job(tmp_path, kafka_broker.bootstrap))

    async def fill_and_read() -> tuple[list[Any], list[Any], list[Any]]:
        system = open_system(config.system("kafka"))
        try:
            await system.create_stream("bulk-mixed", 2, exist_ok=True)
            for chunk in range(3):  # three producer batches
                mixed = _mixed_records("bulk-mixed", 60, partition=1)[chunk * 20:chunk * 20 + 20]
                await system.produce([r for r in mixed if r.key is not None or r.value is not None])
            end = (await system.offsets("bulk-mixed"))[1].end
            found = []
            for start, stop in ((0, end), (13, 47)):
                got = []
                async for columns in kafka_fetch.read_kafka_columns(system, "bulk-mixed", 1,
                                                                    start, stop):
                    got.extend(record_batch(columns, 1, arrow_schema(True), None).to_pylist())
                found.append((got, await _one_by_one(system, "bulk-mixed", 1, start, stop, True)))
            return found[0][0], found[0][1], found[1]
        finally:
            await system.close()

    got, expected, (middle, middle_expected) = asyncio.run(fill_and_read())

    assert len(got) == 60
    assert got == expected
    assert middle == middle_expected
    assert [r["offset"] for r in middle] == list(range(13, 47))


def test_spark_reads_many_batches_exactly_with_offset_options(spark: Any, tmp_path: Path) -> None:
    """20,000 records over 3 partitions: several bulk scans per partition, read whole and
    between JSON offsets of chosen partitions."""
    path = wordcount_job(tmp_path / "wordcount")
    sizes = {0: 9_000, 1: 7_000, 2: 4_000}

    async def fill(system: Any) -> None:
        await system.create_stream("words", 3)
        await system.produce([
            ProducerRecord("words", f"w{n % 1_000}".encode(), json.dumps({"seq": n}).encode(),
                           partition=p)
            for p, size in sizes.items() for n in range(size)])

    on_system(load_config(path), fill)
    frame = spark.read.format("sampan").option("job", str(path)).option("stream", "local.words")

    whole = frame.load().groupBy("partition").agg(
        {"offset": "sum", "value": "count", "key": "count"}).collect()
    ranged = (frame.option("partitions", "0,2")
              .option("startingOffsets", json.dumps({"0": 4_095, "2": 100}))
              .option("endingOffsets", json.dumps({"0": 8_193})).load()
              .select("partition", "offset", "value").collect())

    assert sorted((r["partition"], r["sum(offset)"], r["count(value)"], r["count(key)"])
                  for r in whole) == [(p, size * (size - 1) // 2, size, size)
                                      for p, size in sizes.items()]
    expected = [(0, n, f'{{"seq":{n}}}') for n in range(4_095, 8_193)] + [
        (2, n, f'{{"seq":{n}}}') for n in range(100, 4_000)]
    assert sorted((r["partition"], r["offset"], r["value"]) for r in ranged) == expected
