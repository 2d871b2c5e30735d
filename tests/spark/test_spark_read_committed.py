"""The Spark DataSource's own Kafka reads (`framework.spark.kafka_fetch`, its own Fetch
requests) are read_committed on real Apache Kafka: committed records only, never past an
open transaction."""

from __future__ import annotations

from typing import Any

from kafka_txn import transaction_cases

from framework.spark import kafka_fetch
from framework.systems.kafka.system import KafkaSystem


async def _committed(system: Any, topic: str, end: int) -> list[tuple[int, bytes | None]]:
    got: list[tuple[int, bytes | None]] = []
    async for columns in kafka_fetch.read_kafka_columns(system, topic, 0, 0, end):
        got.extend(zip(columns[0], columns[2], strict=True))
    return got


async def test_kafka_fetches_read_committed_transactions_only(kafka_broker: Any) -> None:
    """Offsets 0 committed, 1 COMMIT, 2 aborted, 3 ABORT, 4 plain, 5 open — then committed
    at 6."""
    system = KafkaSystem("kafka", kafka_broker.bootstrap)
    try:
        async with transaction_cases(kafka_broker.bootstrap, "spark-rc") as (topic, commit):
            visible = [(0, b"committed"), (4, b"plain")]
            assert await _committed(system, topic, 5) == visible
            assert await _committed(system, topic, 6) == visible  # undecided at the log's end
            await commit()
            assert await _committed(system, topic, 6) == [*visible, (5, b"open")]
            assert await _committed(system, topic, 5) == visible  # the end stays exclusive
    finally:
        await system.close()
