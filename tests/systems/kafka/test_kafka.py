"""The kafka system against real Apache Kafka and against tansu (a second implementation of
the protocol): metadata topics are compacted and hidden, offsets and batches are right on
both, and what tansu lacks (CreatePartitions, InitProducerId) fails fast and clearly."""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import pytest

from framework.errors import (
    ConfigError,
    SampanError,
    SystemUnavailableError,
    UnsupportedOperation,
)
from framework.partitioner import partition_for_key
from framework.systems import open_system
from framework.systems.base import (
    Checkpoint,
    CommitRequest,
    OffsetRange,
    OutputColumns,
    ProducerRecord,
    Record,
    as_record,
)
from framework.systems.kafka.options import KafkaOptions
from framework.systems.kafka.system import KafkaSystem, checkpoints_topic, fences_topic
from groupers import SystemStreamPartition as SSP

BOUND_S = 15  # generous bound for calls that must fail fast, never a timing assertion


@pytest.fixture(params=["kafka", "tansu"])
def broker(request: pytest.FixtureRequest) -> Any:
    """Apache Kafka, then tansu: the tests taking it hold on both implementations."""
    return request.getfixturevalue(f"{request.param}_broker")


@pytest.fixture
async def kafka(broker: Any) -> AsyncIterator[KafkaSystem]:
    system = KafkaSystem("kafka", broker.bootstrap)
    await system.start()
    yield system
    await system.close()


@pytest.fixture
async def tansu(tansu_broker: Any) -> AsyncIterator[KafkaSystem]:
    system = KafkaSystem("kafka", tansu_broker.bootstrap)
    await system.start()
    yield system
    await system.close()


@pytest.fixture
def name() -> str:
    return f"k-{uuid.uuid4().hex[:12]}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_expansion_on_tansu_fails_fast_naming_create_partitions(
    tansu: KafkaSystem, name: str
) -> None:
    await tansu.create_stream(name, 2)
    with pytest.raises(UnsupportedOperation, match=f"CreatePartitions.*{name}"):
        await asyncio.wait_for(tansu.expand_stream(name, 4), BOUND_S)
    assert await tansu.partition_counts([name]) == {name: 2}


async def test_expansion_on_kafka_grows_the_topic_and_keeps_its_records(
    kafka_broker: Any, name: str
) -> None:
    system = KafkaSystem("kafka", kafka_broker.bootstrap)
    try:
        await system.create_stream(name, 2)
        await system.produce([ProducerRecord(name, b"k%d" % i, b"v") for i in range(20)])
        before = await system.offsets(name)
        await asyncio.wait_for(system.expand_stream(name, 4), BOUND_S)
        assert await system.partition_counts([name]) == {name: 4}
        after = await system.offsets(name)
        assert {p: after[p] for p in (0, 1)} == before
        assert after[2] == after[3] == OffsetRange(0, 0)
        with pytest.raises(SampanError, match=rf"{name}.*4"):  # never shrinks
            await asyncio.wait_for(system.expand_stream(name, 2), BOUND_S)
    finally:
        await system.close()


async def test_an_unreachable_broker_is_reported_with_its_address() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    system = KafkaSystem("kafka", bootstrap, {"timeout_s": 2})
    with pytest.raises(SystemUnavailableError, match=f"Kafka at {bootstrap}.*bootstrap"):
        await asyncio.wait_for(system.start(), BOUND_S)
    await system.close()


async def test_requiring_idempotence_on_tansu_names_init_producer_id(tansu_broker: Any) -> None:
    system = KafkaSystem("kafka", tansu_broker.bootstrap, {"enable_idempotence": True})
    with pytest.raises(UnsupportedOperation, match=r"InitProducerId.*enable_idempotence = false"):
        await asyncio.wait_for(system.start_producer(), BOUND_S)
    await system.close()


async def test_a_broker_refusing_idempotence_is_reported_once_without_library_errors(
        tansu_broker: Any, caplog: pytest.LogCaptureFixture) -> None:
    """tansu refuses InitProducerId: one sampan WARNING saying what it does instead, and no
    ERROR line from aiokafka for a refusal sampan handles; only once a producer is needed
    (reading never asks for one)."""
    caplog.set_level(logging.INFO)
    system = KafkaSystem("kafka", tansu_broker.bootstrap)
    try:
        await asyncio.wait_for(system.start(), BOUND_S)
        await system.list_streams()
        assert not [r for r in caplog.records if "idempotent producer" in r.getMessage()]
        await asyncio.wait_for(system.start_producer(), BOUND_S)
        await asyncio.wait_for(system.start_producer(), BOUND_S)
    finally:
        await system.close()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]
    warnings = [r.getMessage() for r in caplog.records if "idempotent producer" in r.getMessage()]
    assert len(warnings) == 1 and "producing with acks=all only" in warnings[0]


async def test_apache_kafka_takes_the_idempotent_producer_without_a_warning(
        kafka_broker: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    system = KafkaSystem("kafka", kafka_broker.bootstrap, {"enable_idempotence": True})
    try:
        await asyncio.wait_for(system.start(), BOUND_S)
    finally:
        await system.close()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_compacted_streams_get_cleanup_policy_compact(kafka: KafkaSystem, name: str) -> None:
    await kafka.create_stream(f"{name}-log", 1, compacted=True)
    await kafka.create_stream(f"{name}-plain", 1)

    assert await kafka.admin.cleanup_policy(f"{name}-log") == "compact"
    assert await kafka.admin.cleanup_policy(f"{name}-plain") == "delete"
    assert await kafka.compact(f"{name}-log") == 0  # the broker compacts in the background


async def test_checkpoint_and_fence_topics_are_compacted_and_not_listed(
    kafka: KafkaSystem, name: str
) -> None:
    job = f"job-{name}"
    await kafka.fence(job, 1)
    await kafka.commit(CommitRequest(job, 1, (), [Checkpoint("t", 1)]))

    assert await kafka.admin.cleanup_policy(checkpoints_topic(job)) == "compact"
    assert await kafka.admin.cleanup_policy(fences_topic(job)) == "compact"
    listed = await kafka.list_streams()
    assert checkpoints_topic(job) not in listed and fences_topic(job) not in listed


async def test_checkpoints_written_by_one_client_are_read_by_another(
    kafka: KafkaSystem, broker: Any, name: str
) -> None:
    job = f"job-{name}"
    for offset in range(1, 6):
        await kafka.commit(CommitRequest(job, 2, (), [
            Checkpoint("t", 2, {SSP("kafka", "in", 0): offset}, {"store": offset})]))

    other = KafkaSystem("kafka", broker.bootstrap)
    try:
        assert await other.read_checkpoints(job) == {
            "t": Checkpoint("t", 2, {SSP("kafka", "in", 0): 5}, {"store": 5})}
    finally:
        await other.close()


async def test_end_offsets_count_every_record_of_multi_record_batches(
    kafka: KafkaSystem, name: str
) -> None:
    # tansu once answered ListOffsets(latest) with the last batch's base offset + 1.
    await kafka.create_stream(name, 1)
    await kafka.produce([ProducerRecord(name, b"k", b"%d" % i, partition=0) for i in range(50)])
    await kafka.produce([ProducerRecord(name, b"k", b"%d" % i, partition=0) for i in range(7)])

    assert await kafka.offsets(name) == {0: OffsetRange(0, 57)}


async def test_reading_a_missing_stream_does_not_create_it(kafka: KafkaSystem, name: str) -> None:
    consumer = kafka.consumer()
    consumer.assign({SSP("kafka", name, 0): 0})
    assert await consumer.fetch(timeout_ms=50) == {}
    await consumer.close()
    assert name not in await kafka.list_streams()


def test_open_system_builds_a_kafka_system() -> None:
    class Settings:
        name, type, path, bootstrap = "events", "kafka", None, "127.0.0.1:9092"
        client_options: ClassVar[dict[str, int]] = {"timeout_s": 3, "replication_factor": 3}

    system = open_system(Settings())
    assert isinstance(system, KafkaSystem)
    assert (system.name, system.bootstrap) == ("events", "127.0.0.1:9092")
    assert (system.options.timeout_s, system.options.replication_factor) == (3, 3)


def test_unknown_client_options_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"\[systems.events.client_options\].*'linger'"):
        KafkaSystem("events", "127.0.0.1:9092", {"linger": 5})


@pytest.mark.parametrize("key", ["producer_batch_kb", "fetch_partition_kb"])
@pytest.mark.parametrize("bad", [0, -1, 2**21, 1.5, "512"])
def test_a_bad_batch_or_fetch_size_is_refused_naming_the_key(key: str, bad: object) -> None:
    with pytest.raises(ConfigError, match=rf"client_options\] {key} must be a whole number"):
        KafkaSystem("events", "127.0.0.1:9092", {key: bad})


async def test_a_record_with_neither_key_nor_value_is_refused_naming_the_stream(
        broker: Any, name: str) -> None:
    system = KafkaSystem("kafka", broker.bootstrap)
    try:
        await system.create_stream(name, 2)
        with pytest.raises(SampanError, match=rf"stream '{name}' has neither key nor value"):
            await system.produce_rows([(name, b"k", b"v", None, None, ()),
                                       (name, None, None, None, None, ())])
        with pytest.raises(SampanError, match=rf"stream '{name}' has neither key nor value"):
            await system.produce_rows([(name, None, None, 1, None, ())])  # even placed
        with pytest.raises(TypeError, match=rf"stream '{name}': key and value must be bytes"):
            await system.produce_rows([(name, b"k", b"v", None, None, ()),  # a known key,
                                       (name, b"k", "text", None, None, ())])  # a bad value
    finally:
        await system.close()


@pytest.mark.parametrize("batch_kb", [1, 512])
async def test_records_split_over_many_or_few_batches_land_in_order(
    broker: Any, name: str, batch_kb: int
) -> None:
    """Batch size 1 KiB is also read with 1 KiB fetches (many round trips), 512 with the
    default: every record either way, in order."""
    fetch_kb = 1 if batch_kb == 1 else KafkaOptions.fetch_partition_kb
    system = KafkaSystem("kafka", broker.bootstrap,
                         {"producer_batch_kb": batch_kb, "fetch_partition_kb": fetch_kb})
    try:
        await system.create_stream(name, 2)
        records = [ProducerRecord(name, b"k%d" % (i % 7), b"value-%05d" % i) for i in range(3000)]
        positions = await system.produce(records)
        consumer = system.consumer()
        consumer.assign({SSP("kafka", name, 0): 0, SSP("kafka", name, 1): 0})
        read: dict[int, list[tuple[int, bytes | None]]] = {0: [], 1: []}
        for _ in range(100):  # bounded: a lost record fails the assertions below
            if sum(map(len, read.values())) >= len(records):
                break
            for ssp, batch in (await consumer.fetch(max_records=1000, timeout_ms=500)).items():
                read[ssp.partition].extend((r.offset, r.value) for r in batch)
        client = consumer._consumer  # the option reaches aiokafka's fetcher
        assert client is not None and client._fetcher._max_partition_fetch_bytes == fetch_kb << 10
        await consumer.close()
    finally:
        await system.close()
    for record, position in zip(records, positions, strict=True):
        assert read[position.partition][position.offset] == (position.offset, record.value)
    assert {p: len(v) for p, v in read.items()} == {
        p: sum(1 for pos in positions if pos.partition == p) for p in (0, 1)}


async def test_rows_land_in_order_with_positions_of_the_leading_rows_only(
    broker: Any, name: str
) -> None:
    from aiokafka import AIOKafkaProducer

    system = KafkaSystem("kafka", broker.bootstrap, {"producer_batch_kb": 1})
    try:
        await system.create_stream(name, 2)
        changelog = [(name, b"c%02d" % i, b"x" * 30, 1, None, ()) for i in range(40)]
        outputs = [(name, b"k%d" % (i % 5), b"v%04d" % i, None, 1_000 + i,
                    (("trace", b"t%d" % i),)) for i in range(200)]
        positions = await system.produce_rows(changelog + outputs, positions=len(changelog))
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await producer.start()
        try:  # a header without a value, as other Kafka clients may write
            await producer.send_and_wait(name, b"last", key=b"n", partition=0,
                                         timestamp_ms=7, headers=[("empty", None)])
        finally:
            await producer.stop()
        consumer = system.consumer()
        consumer.assign({SSP("kafka", name, 0): 0, SSP("kafka", name, 1): 0})
        raw: dict[int, list[Any]] = {0: [], 1: []}
        for _ in range(100):  # bounded: a lost record fails the assertions below
            if sum(map(len, raw.values())) >= len(changelog) + len(outputs) + 1:
                break
            for ssp, batch in (await consumer.fetch_raw(1000, 500)).items():
                raw[ssp.partition].extend(batch)
        await consumer.close()
    finally:
        await system.close()
    assert [(p.stream, p.partition, p.offset) for p in positions] == [
        (name, 1, offset) for offset in range(40)]
    read = {p: [as_record(p, one) for one in records] for p, records in raw.items()}
    assert [r.offset for r in read[0]] == list(range(len(read[0])))
    assert [r.offset for r in read[1]] == list(range(len(read[1])))
    assert [(r.key, r.value) for r in read[1][:40]] == [(k, v) for _, k, v, *_ in changelog]
    landed = [r for p in (0, 1) for r in read[p] if r.key and r.key.startswith(b"k")]
    expected = sorted((partition_for_key(k, 2), v, t, h) for _, k, v, _, t, h in outputs)
    assert sorted((r.partition, r.value, r.timestamp, r.headers) for r in landed) == expected
    for partition in (0, 1):  # each key's outputs in the order sent
        values = [r.value for r in read[partition] if r.key and r.key.startswith(b"k")]
        assert values == sorted(values)
    assert read[0][-1] == Record(0, read[0][-1].offset, b"n", b"last", 7, (("empty", b""),))


@pytest.mark.parametrize("batch_kb", [1, 512])
async def test_columns_land_after_the_rows_in_their_keys_partitions_in_order(
    broker: Any, name: str, batch_kb: int
) -> None:
    """A worker's outputs as `OutputColumns` (batches full at 1 KiB, or not): every record
    once, in its key's partition, in the order sent, after the rows of the same call;
    positions are the rows' only."""
    system = KafkaSystem("kafka", broker.bootstrap, {"producer_batch_kb": batch_kb})
    try:
        await system.create_stream(name, 3)
        rows = [(name, b"c%d" % i, b"row-%d" % i, 2, None, ()) for i in range(5)]
        keys = [b"k%d" % (i % 11) for i in range(2000)]
        values = [None if i % 13 == 0 else b"v%05d" % i for i in range(2000)]
        positions = await system.produce_rows(rows, positions=5, columns=[
            OutputColumns(name, keys[:1500], values[:1500]),
            OutputColumns(name, keys[1500:], values[1500:])])
        assert [(p.partition, p.offset) for p in positions] == [(2, i) for i in range(5)]
        consumer = system.consumer()
        consumer.assign({SSP("kafka", name, p): 0 for p in range(3)})
        read: dict[int, list[tuple[int, bytes | None, bytes | None]]] = {0: [], 1: [], 2: []}
        for _ in range(100):  # bounded: a lost record fails the assertions below
            if sum(map(len, read.values())) >= len(rows) + len(keys):
                break
            for ssp, batch in (await consumer.fetch(max_records=1000, timeout_ms=500)).items():
                read[ssp.partition].extend((r.offset, r.key, r.value) for r in batch)
        await consumer.close()
    finally:
        await system.close()
    want: dict[int, list[tuple[bytes | None, bytes | None]]] = {
        0: [], 1: [], 2: [(k, v) for _, k, v, *_ in rows]}
    for key, value in zip(keys, values, strict=True):
        want[partition_for_key(key, 3)].append((key, value))
    for partition, records in read.items():
        assert [offset for offset, _, _ in records] == list(range(len(records)))
        assert [(key, value) for _, key, value in records] == want[partition]


async def test_a_store_restores_from_a_kafka_changelog_in_full_then_by_delta(
    kafka: KafkaSystem, name: str, tmp_path: Any
) -> None:
    """The restore's Kafka path (plain columns from the consumer's raw fetch): every record
    of the partition up to the end and none past it, tombstones applied, the other
    partition left alone; then only the delta, then nothing."""
    from framework.stores import RocksDBEngine, changelog_reader, restore_store

    await kafka.create_stream(name, 2, compacted=True)
    await kafka.produce(
        [ProducerRecord(name, f"k{i % 40:03d}".encode(), f"v{i}".encode(), partition=1)
         for i in range(100)]
        + [ProducerRecord(name, b"k000", None, partition=1),
           ProducerRecord(name, b"other", b"x", partition=0)])
    ssp = SSP("kafka", name, 1)

    async def restore(engine: RocksDBEngine, end: int) -> tuple[str, int, int]:
        result = await restore_store(
            engine, changelog=(name, 1), oldest=0, end=end,
            fetch=changelog_reader(kafka, ssp, end, batch_size=16), batch_size=32,
            progress=None)
        return result.mode, result.records, engine.count()

    engine = RocksDBEngine.open(tmp_path, "counts", "Partition 1")
    try:
        assert await restore(engine, 60) == ("full", 60, 40)  # cut inside a fetched batch
        assert engine.get(b"k019") == b"v59" and engine.get(b"k020") == b"v20"
        assert await restore(engine, 101) == ("delta", 41, 39)
        assert (engine.get(b"k001"), engine.get(b"k000"), engine.get(b"other")) == (
            b"v81", None, None)
        assert await restore(engine, 101) == ("none", 0, 39)
        assert dict(engine.iterate()) == {
            f"k{i % 40:03d}".encode(): f"v{i}".encode() for i in range(60, 100) if i != 80}
    finally:
        engine.close()
