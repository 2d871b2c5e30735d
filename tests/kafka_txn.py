"""Transactions on a real broker for tests: a topic holding committed, aborted, plain and
open transactional records at known offsets."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

__all__ = ["transaction_cases"]


@asynccontextmanager
async def transaction_cases(bootstrap: str, prefix: str
                            ) -> AsyncIterator[tuple[str, Callable[[], Awaitable[None]]]]:
    """A new one-partition topic holding, by offset: 0 committed, 1 its COMMIT marker,
    2 aborted, 3 its ABORT marker, 4 a plain (non-transactional) record, 5 a record of a
    transaction still open; yields the topic and the call that commits it (marker at 6)."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{topic}-txn")
    plain = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    await plain.start()
    try:
        async with producer.transaction():
            await producer.send_and_wait(topic, b"committed", partition=0)
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"aborted", partition=0)
        await producer.abort_transaction()
        # The ABORT marker is written after abort_transaction returns: a plain record sent
        # before it would take its offset (seen in a full run: "plain" at 3).
        await _until_end(bootstrap, topic, 4)
        await plain.send_and_wait(topic, b"plain", partition=0)
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"open", partition=0)
        yield topic, producer.commit_transaction
    finally:
        await plain.stop()
        await producer.stop()


async def _until_end(bootstrap: str, topic: str, end: int, timeout_s: float = 30) -> None:
    """Wait until partition 0 of ``topic`` ends at ``end`` or later (high watermark)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    partition = TopicPartition(topic, 0)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        deadline = time.monotonic() + timeout_s
        while (await consumer.end_offsets([partition]))[partition] < end:
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}[0] did not reach offset {end} in {timeout_s} s")
            await asyncio.sleep(0.05)
    finally:
        await consumer.stop()
