"""The Kafka consumer's columnar fetch (`kafka.fetch_columns`) against aiokafka's own
record-by-record read_committed path, on real Apache Kafka: every record, in order, with
its offset, key, value, timestamp and headers — through plain, compressed and
transactional batches, an aborted transaction skipped and the control batches passed —
however the fetches are cut, and from a position inside a compressed batch."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from polling import apoll

from framework.systems.fetched import FetchedColumns
from framework.systems.kafka.fetch_columns import ABORT, COMMIT, DATA, TxnChunk, merged
from framework.systems.kafka.system import KafkaSystem
from framework.systems.kafka.txn_filter import CommittedFilter
from groupers import SystemStreamPartition as SSP

DEADLINE_S = 120

Row = tuple[int, bytes | None, bytes | None, int, tuple[tuple[str, bytes | None], ...]]


async def _write(bootstrap: str, topic: str) -> int:
    """Plain, gzip-compressed, committed and aborted transactional batches in one
    partition; returns how many data records were written (committed or not)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        await admin.close()
    plain = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=50)
    gzip = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip",
                            linger_ms=50)
    txn = AIOKafkaProducer(bootstrap_servers=bootstrap,
                           transactional_id=f"columns-{uuid.uuid4().hex[:8]}")
    written = 0
    for producer in (plain, gzip, txn):
        await producer.start()
    try:
        async def batch(producer: AIOKafkaProducer, tag: str, count: int) -> None:
            nonlocal written
            futures = [await producer.send(
                topic, key=None if i % 3 == 0 else f"{tag}-k{i}".encode(),
                value=None if i % 5 == 4 else f"{tag}-v{i}".encode(),
                timestamp_ms=1_700_000_000_000 + written + i,
                headers=[("h", f"{tag}{i}".encode()), ("none", None)] if i % 2 else None,
                partition=0) for i in range(count)]
            for future in futures:
                await future
            written += count

        await batch(plain, "plain", 7)
        await batch(gzip, "gzip", 9)
        async with txn.transaction():
            await batch(txn, "committed", 6)
        await batch(plain, "between", 4)
        await txn.begin_transaction()
        await batch(txn, "aborted", 5)
        await txn.abort_transaction()
        await batch(gzip, "gzip-after", 8)
        async with txn.transaction():
            await batch(txn, "last", 3)
        await batch(plain, "tail", 2)
    finally:
        for producer in (plain, gzip, txn):
            await producer.stop()
    return written


async def _aiokafka_rows(bootstrap: str, topic: str, start: int, expected: int) -> list[Row]:
    """Every committed record from ``start`` on as aiokafka's own read_committed consumer
    hands them out (one `ConsumerRecord` each)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                isolation_level="read_committed")
    await consumer.start()
    rows: list[Row] = []
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, start)
        started = time.monotonic()
        while len(rows) < expected:
            assert time.monotonic() - started < DEADLINE_S, rows
            for records in (await consumer.getmany(tp, timeout_ms=200)).values():
                rows += [(r.offset, r.key, r.value, r.timestamp, tuple(r.headers))
                         for r in records]
    finally:
        await consumer.stop()
    return rows


async def _columnar_rows(system: KafkaSystem, topic: str, start: int, expected: int,
                         max_records: int) -> list[Row]:
    """The same through the worker's read (`KafkaConsumer.fetch_raw`), checking that
    every fetch hands out columns."""
    consumer = system.consumer()
    rows: list[Row] = []
    try:
        consumer.assign({SSP("kafka", topic, 0): start})
        started = time.monotonic()
        while len(rows) < expected:
            assert time.monotonic() - started < DEADLINE_S, rows
            fetched = await consumer.fetch_raw(max_records, 200)  # type: ignore[attr-defined]
            for columns in fetched.values():
                assert type(columns) is FetchedColumns
                rows += [(offset, key, value, timestamp, tuple(headers))
                         for offset, key, value, timestamp, headers in columns.rows()]
            if not fetched:
                await apoll(started)
    finally:
        await consumer.close()
    return rows


@pytest.mark.parametrize("max_records", [1000, 4, 1])
async def test_columnar_fetch_hands_out_what_aiokafkas_record_path_does(
        kafka_broker: Any, max_records: int) -> None:
    topic = f"columns-{uuid.uuid4().hex[:8]}"
    written = await _write(kafka_broker.bootstrap, topic)
    expected = written - 5  # the aborted transaction's records
    reference = await _aiokafka_rows(kafka_broker.bootstrap, topic, 0, expected)
    system = KafkaSystem("kafka", kafka_broker.bootstrap)
    await system.start()
    try:
        rows = await _columnar_rows(system, topic, 0, expected, max_records)
    finally:
        await system.close()
    assert len(reference) == expected
    assert rows == reference
    assert not [row for row in rows if row[2] is not None and b"aborted" in row[2]]
    assert [row[0] for row in rows] == sorted({row[0] for row in rows})


async def test_columnar_fetch_from_inside_a_compressed_batch_starts_at_its_position(
        kafka_broker: Any) -> None:
    topic = f"columns-{uuid.uuid4().hex[:8]}"
    written = await _write(kafka_broker.bootstrap, topic)
    start = 7 + 4  # the fifth record of the first gzip batch (offsets 7-15)
    expected = written - 5 - start
    reference = await _aiokafka_rows(kafka_broker.bootstrap, topic, start, expected)
    system = KafkaSystem("kafka", kafka_broker.bootstrap)
    await system.start()
    try:
        rows = await _columnar_rows(system, topic, start, expected, 1000)
    finally:
        await system.close()
    assert rows[0][0] == start
    assert rows == reference


def _chunk(offsets: list[int], pid: int = -1, epoch: int = 0) -> TxnChunk:
    columns = FetchedColumns()
    columns.extend(offsets, [b"k"] * len(offsets), [b"v"] * len(offsets),
                   [0] * len(offsets), [()] * len(offsets))
    return TxnChunk(offsets[0], pid, epoch, pid >= 0, DATA, columns)


def _marker(offset: int, pid: int, control: int, epoch: int = 0) -> TxnChunk:
    return TxnChunk(offset, pid, epoch, True, control, None)


def test_chunks_of_an_open_transaction_are_held_then_released_at_its_commit() -> None:
    committed = CommittedFilter()
    released = merged(committed.release([_chunk([0, 1]), _chunk([2, 3], pid=7),
                                         _chunk([4])]))
    assert released is not None and released.offsets == [0, 1]
    assert committed.holding == 2
    released = merged(committed.release([_marker(5, 7, COMMIT), _chunk([6])]))
    assert released is not None and released.offsets == [2, 3, 4, 6]
    assert committed.holding is None


def test_chunks_of_an_aborted_transaction_are_dropped() -> None:
    committed = CommittedFilter()
    released = merged(committed.release([_chunk([0], pid=7), _chunk([1]),
                                         _marker(2, 7, ABORT), _chunk([3])]))
    assert released is not None and released.offsets == [1, 3]
    assert committed.holding is None
