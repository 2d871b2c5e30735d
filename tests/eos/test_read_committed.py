"""read_committed on the mock cluster, whose Fetch does not filter: sampan's consumer does."""

from __future__ import annotations

import uuid

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from kafka_mock import MockCluster, transaction_cases

from framework.errors import UnsupportedOperation
from framework.systems.kafka.fencing import fence_producer
from framework.systems.kafka.system import KafkaSystem
from framework.systems.reading import read_columns_range, read_range
from groupers import SystemStreamPartition


async def _read(system: KafkaSystem, topic: str) -> list[tuple[int, bytes | None]]:
    end = (await system.offsets(topic))[0].end
    ssp = SystemStreamPartition(system.name, topic, 0)
    records = [(r.offset, r.value) async for batch in read_range(system, ssp, 0, end)
               for r in batch]
    columns = [pair async for offsets, _, values in read_columns_range(system, ssp, 0, end)
               for pair in zip(offsets, values, strict=True)]
    assert columns == records  # a restore's column reads see what record reads see
    return records


async def test_readers_see_committed_transactions_only(kafka_mock: MockCluster) -> None:
    """Offsets: 0 committed, 1 COMMIT, 2 aborted, 3 ABORT, 4 plain, 5 open (then 6 COMMIT)."""
    system = KafkaSystem("kafka", kafka_mock.bootstrap)
    try:
        async with transaction_cases(kafka_mock, "rc") as (topic, commit):
            assert await _read(system, topic) == [(0, b"committed"), (4, b"plain")]
            assert (await system.offsets(topic))[0].end == 5  # the open transaction is not in
            await commit()
            assert await _read(system, topic) == [(0, b"committed"), (4, b"plain"),
                                                  (5, b"open")]
            assert (await system.offsets(topic))[0].end == 6  # the COMMIT marker is not either
    finally:
        await system.close()


async def test_an_epoch_bump_fences_the_producer_and_aborts_its_transaction(
        kafka_mock: MockCluster) -> None:
    topic = f"fence-{uuid.uuid4().hex[:8]}"
    kafka_mock.create_topic(topic, 1)
    txn_id = f"{topic}-txn"
    zombie = AIOKafkaProducer(bootstrap_servers=kafka_mock.bootstrap, transactional_id=txn_id)
    system = KafkaSystem("kafka", kafka_mock.bootstrap)
    await zombie.start()
    await system.start()
    try:
        await zombie.begin_transaction()
        await zombie.send_and_wait(topic, b"never", partition=0)
        manager = zombie._txn_manager
        identity = (manager.producer_id, manager.producer_epoch)
        producer = await system.start_producer()
        bumped = await fence_producer(producer.client, txn_id, identity)
        assert bumped == (identity[0], identity[1] + 1)
        assert await fence_producer(producer.client, txn_id, identity) is None
        with pytest.raises(KafkaError):
            await zombie.commit_transaction()
        assert await _read(system, topic) == []
    finally:
        await system.close()
        await zombie.stop()


async def test_probe_refuses_a_broker_without_transactions(tansu_broker: object) -> None:
    system = KafkaSystem("kafka", tansu_broker.bootstrap)  # type: ignore[attr-defined]
    try:
        with pytest.raises(UnsupportedOperation, match='guarantee = "at-least-once"'):
            await system.probe_transactions("probe-job")
    finally:
        await system.close()


async def test_the_mock_cluster_cannot_create_topics(kafka_mock: MockCluster) -> None:
    """No CreateTopics on the mock: a clear refusal, and existing topics need none."""
    topic = f"new-{uuid.uuid4().hex[:8]}"
    system = KafkaSystem("kafka", kafka_mock.bootstrap)
    try:
        with pytest.raises(UnsupportedOperation, match="cannot create topics"):
            await system.create_stream(topic, 2)
        kafka_mock.create_topic(topic, 2)
        await system.create_stream(topic, 2, exist_ok=True)
        assert (await system.partition_counts([topic]))[topic] == 2
    finally:
        await system.close()
