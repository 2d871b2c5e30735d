"""The ``sampan`` DataSource on the real local log and a real Kafka-protocol broker."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from sparkjobs import on_system, wordcount_job

from framework.config import load_config
from framework.partitioner import partition_for_key
from framework.systems import open_system
from framework.systems.base import ProducerRecord

RECORDS = [("apple", 1), ("kiwi", 2), ("apple", 3), ("fig", 4), ("plum", 5), ("kiwi", 6)]


@pytest.fixture
def job(tmp_path: Path) -> Path:
    """Word count with ``local.words`` on 4 partitions holding `RECORDS` (with a header)."""
    path = wordcount_job(tmp_path / "wordcount")
    config = load_config(path)

    async def fill(system: Any) -> None:
        await system.create_stream("words", 4)
        await system.produce([
            ProducerRecord("words", word.encode(), json.dumps({"seq": seq}).encode(),
                           timestamp=1000 + seq, headers=(("source", b"test"),))
            for word, seq in RECORDS])

    on_system(config, fill)
    return path


def _read(spark: Any, job: Path, stream: str = "local.words", **options: str) -> Any:
    reader = spark.read.format("sampan").option("job", str(job)).option("stream", stream)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _expected_rows() -> list[tuple[Any, ...]]:
    """`RECORDS` as the log holds them: (partition, offset, key, value), offsets per partition."""
    next_offset: dict[int, int] = {}
    rows = []
    for word, seq in RECORDS:
        partition = partition_for_key(word.encode(), 4)
        offset = next_offset.get(partition, 0)
        next_offset[partition] = offset + 1
        rows.append((partition, offset, word, f'{{"seq":{seq}}}'))
    return sorted(rows)


def test_read_decodes_with_the_stream_serdes(spark: Any, job: Path) -> None:
    rows = _read(spark, job).collect()

    assert sorted((r.partition, r.offset, r.key, r.value) for r in rows) == _expected_rows()
    assert sorted(r.timestamp for r in rows) == [1001, 1002, 1003, 1004, 1005, 1006]
    assert {tuple((h.key, bytes(h.value)) for h in r.headers) for r in rows} == {
        (("source", b"test"),)}


def test_read_has_one_spark_partition_per_stream_partition(spark: Any, job: Path) -> None:
    assert _read(spark, job).rdd.getNumPartitions() == 4
    assert _read(spark, job, partitions="1,3").rdd.getNumPartitions() == 2


def test_read_raw_gives_bytes(spark: Any, job: Path) -> None:
    rows = _read(spark, job, raw="true").collect()

    assert sorted((bytes(r.key), bytes(r.value)) for r in rows) == sorted(
        (w.encode(), json.dumps({"seq": s}).encode()) for w, s in RECORDS)


def test_read_between_offsets_of_chosen_partitions(spark: Any, job: Path) -> None:
    expected = _expected_rows()
    busiest = max({p for p, *_ in expected}, key=lambda p: sum(r[0] == p for r in expected))
    wanted = [r for r in expected if r[0] == busiest][1:]

    rows = _read(spark, job, partitions=str(busiest),
                 startingOffsets=json.dumps({str(busiest): 1}), endingOffsets="latest").collect()

    assert sorted((r.partition, r.offset, r.key, r.value) for r in rows) == wanted


def test_read_names_a_missing_option(spark: Any, job: Path) -> None:
    with pytest.raises(Exception, match='the sampan DataSource needs option "stream"'):
        spark.read.format("sampan").option("job", str(job)).load().collect()


def test_stream_reader_with_available_now_reads_only_new_records(
        spark: Any, job: Path, tmp_path: Path) -> None:
    def run_once() -> list[tuple[str, str]]:
        seen: list[tuple[str, str]] = []
        query = (spark.readStream.format("sampan").option("job", str(job))
                 .option("stream", "local.words").load().select("key", "value")
                 .writeStream.foreachBatch(
                     lambda batch, _: seen.extend((r.key, r.value) for r in batch.collect()))
                 .option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        return sorted(seen)

    assert run_once() == sorted((w, f'{{"seq":{s}}}') for w, s in RECORDS)
    on_system(load_config(job), lambda system: system.produce(
        [ProducerRecord("words", b"pear", b'{"seq":7}')]))
    assert run_once() == [("pear", '{"seq":7}')]


def test_writer_uses_the_kafka_default_partitioner(spark: Any, job: Path) -> None:
    frame = spark.createDataFrame(
        [("apple", '{"count":2,"seq":3}'), ("fig", '{"count":1,"seq":4}')],
        "key string, value string")

    frame.write.format("sampan").option("job", str(job)).option(
        "stream", "local.word-counts").mode("append").save()

    async def written(system: Any) -> list[tuple[int, bytes, bytes]]:
        found = []
        for partition, span in (await system.offsets("word-counts")).items():
            consumer = system.consumer()
            from groupers import SystemStreamPartition
            consumer.assign({SystemStreamPartition("local", "word-counts", partition): 0})
            while span.end and len([f for f in found if f[0] == partition]) < span.end:
                for records in (await consumer.fetch()).values():
                    found.extend((r.partition, r.key, r.value) for r in records)
            await consumer.close()
        return sorted(found)

    assert on_system(load_config(job), written) == sorted([
        (partition_for_key(b"apple", 2), b"apple", b'{"count":2,"seq":3}'),
        (partition_for_key(b"fig", 2), b"fig", b'{"count":1,"seq":4}')])


def test_writer_honours_a_partition_column(spark: Any, job: Path) -> None:
    frame = spark.createDataFrame([(b"k", b"v", 1)], "key binary, value binary, partition int")

    frame.write.format("sampan").option("job", str(job)).option(
        "stream", "local.word-counts").mode("append").save()

    rows = _read(spark, job, stream="local.word-counts", raw="true").collect()
    assert [(r.partition, r.offset, bytes(r.key), bytes(r.value)) for r in rows] == [
        (1, 0, b"k", b"v")]


def test_a_write_from_another_thread_finds_the_source_once_registered_there(
        spark: Any, job: Path) -> None:
    """Spark looks a Python data source up for a write in the calling thread's active
    session, not the DataFrame's: a thread of the user's with no session active fails with
    DATA_SOURCE_NOT_FOUND (the mechanism of a re-key's write failing after `register`)
    unless `register(spark)` runs in that thread, which makes ``spark`` active there."""
    from framework.spark import register

    frame = spark.createDataFrame([(b"k", b"v", 0)], "key binary, value binary, partition int")
    errors: list[BaseException] = []

    def write(with_register: bool) -> None:
        try:
            if with_register:
                register(spark)
            frame.write.format("sampan").option("job", str(job)).option(
                "stream", "local.word-counts").mode("append").save()
        except BaseException as error:
            errors.append(error)

    for with_register in (False, True):
        thread = threading.Thread(target=write, args=(with_register,))
        thread.start()
        thread.join(120)
        assert not thread.is_alive()
    assert len(errors) == 1 and "DATA_SOURCE_NOT_FOUND" in str(errors[0]), errors
    rows = _read(spark, job, stream="local.word-counts", raw="true").collect()
    assert [(r.partition, bytes(r.key), bytes(r.value)) for r in rows] == [(0, b"k", b"v")]


def test_read_from_kafka(spark: Any, kafka_broker: Any, tmp_path: Path) -> None:
    path = tmp_path / "job.toml"
    path.write_text(f"""\
[job]
name = "spark-read"
task = "wordcount_task:WordCountTask"
inputs = ["kafka.spark-words"]

[systems.kafka]
type = "kafka"
bootstrap = "{kafka_broker.bootstrap}"

[streams."kafka.spark-words"]
partitions = 3
""")
    config = load_config(path)

    async def fill() -> None:
        system = open_system(config.system("kafka"))
        try:
            await system.create_stream("spark-words", 3, exist_ok=True)
            await system.produce([ProducerRecord("spark-words", w.encode(),
                                                 json.dumps({"seq": s}).encode())
                                  for w, s in RECORDS])
        finally:
            await system.close()

    asyncio.run(fill())
    rows = _read(spark, path, stream="kafka.spark-words").collect()

    assert sorted((r.partition, r.key, r.value) for r in rows) == sorted(
        (partition_for_key(w.encode(), 3), w, f'{{"seq":{s}}}') for w, s in RECORDS)
