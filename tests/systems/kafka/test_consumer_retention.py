"""A position the topic's retention deleted before the job read it: the consumer says so —
stream, partition, the offsets lost — and reads on from the oldest record left, instead of
aiokafka's silent reset."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from framework.systems.base import ProducerRecord
from framework.systems.kafka.system import KafkaSystem
from groupers import SystemStreamPartition as SSP

DEADLINE_S = 180  # the broker's first retention pass comes 30 s after its start


async def test_records_deleted_before_they_were_read_are_named_then_reading_goes_on(
        kafka_broker: Any, caplog: pytest.LogCaptureFixture) -> None:
    stream = f"trimmed-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(stream, 1, 1,
                                            topic_configs={"retention.ms": "1000"})])
    finally:
        await admin.close()
    system = KafkaSystem("kafka", kafka_broker.bootstrap)
    await system.start()
    probe = AIOKafkaConsumer(bootstrap_servers=kafka_broker.bootstrap)
    await probe.start()
    consumer = system.consumer()
    try:
        # Stamped in 1970: the topic's retention deletes them at its next pass.
        await system.produce([ProducerRecord(stream, b"k", f"old-{i}".encode(), timestamp=1_000)
                              for i in range(5)])
        tp = TopicPartition(stream, 0)
        started = time.monotonic()
        while (await probe.beginning_offsets([tp]))[tp] < 5:
            assert time.monotonic() - started < DEADLINE_S, "no retention pass ran"
            await asyncio.sleep(0.5)
        await system.produce([ProducerRecord(stream, b"k", f"new-{i}".encode())
                              for i in range(3)])

        consumer.assign({SSP("kafka", stream, 0): 0})
        got: list[tuple[int, bytes | None]] = []
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="framework.systems.kafka.consumer"):
            while len(got) < 3:
                assert time.monotonic() - started < DEADLINE_S, got
                for records in (await consumer.fetch(10, 200)).values():
                    got += [(r.offset, r.value) for r in records]
    finally:
        await consumer.close()
        await probe.stop()
        await system.close()
    assert got == [(5, b"new-0"), (6, b"new-1"), (7, b"new-2")]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"kafka.{stream} partition 0: offsets 0–4 were deleted by the topic's retention "
        "before this job read them (5 records lost to it); reading on from offset 5 — raise "
        "the topic's retention.ms/retention.bytes so it keeps what a stopped or lagging "
        "job has not read"]
