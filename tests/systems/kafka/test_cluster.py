"""The suite's 3-node Apache Kafka cluster: replicated streams survive the loss of a
partition leader, and a killed node rejoins on its own log folders."""

from __future__ import annotations

import asyncio
import uuid

from aiokafka.admin import AIOKafkaAdminClient
from kafka_broker import KafkaCluster

from framework.systems.base import OffsetRange, ProducerRecord
from framework.systems.kafka.system import KafkaSystem
from groupers import SystemStreamPartition as SSP


async def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        [described] = await admin.describe_topics([topic])
        return {p["partition"]: p["leader"] for p in described["partitions"]}
    finally:
        await admin.close()


async def _read(system: KafkaSystem, topic: str, expected: int) -> list[bytes | None]:
    consumer = system.consumer()
    consumer.assign({SSP("kafka", topic, 0): 0})
    values: list[bytes | None] = []
    try:
        for _ in range(200):  # bounded: a lost record fails the caller's assertion
            if len(values) >= expected:
                break
            for records in (await consumer.fetch(max_records=500, timeout_ms=500)).values():
                values.extend(r.value for r in records)
    finally:
        await consumer.close()
    return values


def test_a_replicated_stream_keeps_every_record_when_its_leader_is_killed(
        kafka_cluster: KafkaCluster) -> None:
    topic = f"rf3-{uuid.uuid4().hex[:8]}"

    async def run() -> tuple[int, int, OffsetRange, list[bytes | None]]:
        system = KafkaSystem("kafka", kafka_cluster.bootstrap, {"replication_factor": 3})
        try:
            await system.create_stream(topic, 1)
            await system.produce([ProducerRecord(topic, b"k", b"%d" % i, partition=0)
                                  for i in range(500)])
            leader = (await _leaders(kafka_cluster.bootstrap, topic))[0]
            kafka_cluster.node(leader).kill()
            await system.produce([ProducerRecord(topic, b"k", b"%d" % i, partition=0)
                                  for i in range(500, 1000)])
            offsets = (await system.offsets(topic))[0]
            values = await _read(system, topic, 1000)
            new_leader = (await _leaders(kafka_cluster.bootstrap, topic))[0]
            return leader, new_leader, offsets, values
        finally:
            await system.close()

    leader, new_leader, offsets, values = asyncio.run(run())

    assert new_leader != leader
    assert offsets == OffsetRange(0, 1000)
    assert values == [b"%d" % i for i in range(1000)]
    kafka_cluster.start(kafka_cluster.node(leader))  # rejoins on its own folders
    assert kafka_cluster.node(leader).alive and kafka_cluster.node(leader).starts == 2
