"""The Spark DataSource's own Kafka reads are read_committed, on librdkafka's mock cluster
(`tests/kafka_mock.py`), whose Fetch ignores the isolation level and lists no aborted
transactions: only the COMMIT/ABORT markers tell."""

from __future__ import annotations

import uuid
from typing import Any

from kafka_mock import kafka_mock

from framework.spark import kafka_fetch

__all__ = ["kafka_mock"]  # the session fixture


async def _committed(system: Any, topic: str, end: int) -> list[tuple[int, bytes | None]]:
    got: list[tuple[int, bytes | None]] = []
    async for columns in kafka_fetch.read_kafka_columns(system, topic, 0, 0, end):
        got.extend(zip(columns[0], columns[2], strict=True))
    return got


async def test_kafka_fetches_read_committed_transactions_only(kafka_mock: Any) -> None:
    """On the mock cluster (whose Fetch does not filter): offsets 0 committed, 1 COMMIT,
    2 aborted, 3 ABORT, 4 plain, 5 open — then committed at 6."""
    from aiokafka import AIOKafkaProducer

    from framework.systems.kafka import KafkaSystem

    topic = f"spark-rc-{uuid.uuid4().hex[:8]}"
    kafka_mock.create_topic(topic, 1)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_mock.bootstrap,
                                transactional_id=f"{topic}-txn")
    plain = AIOKafkaProducer(bootstrap_servers=kafka_mock.bootstrap)
    system = KafkaSystem("kafka", kafka_mock.bootstrap)
    await producer.start()
    await plain.start()
    try:
        async with producer.transaction():
            await producer.send_and_wait(topic, b"committed", partition=0)
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"aborted", partition=0)
        await producer.abort_transaction()
        await plain.send_and_wait(topic, b"plain", partition=0)
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"open", partition=0)

        visible = [(0, b"committed"), (4, b"plain")]
        assert await _committed(system, topic, 5) == visible
        assert await _committed(system, topic, 6) == visible  # undecided at the log's end
        await producer.commit_transaction()
        assert await _committed(system, topic, 6) == [*visible, (5, b"open")]
        assert await _committed(system, topic, 5) == visible  # the end stays exclusive
    finally:
        await system.close()
        await plain.stop()
        await producer.stop()
