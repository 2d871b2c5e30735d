"""Transactions on a real broker for tests: a topic holding committed, aborted, plain and
open transactional records at known offsets."""

from __future__ import annotations

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
        await plain.send_and_wait(topic, b"plain", partition=0)
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"open", partition=0)
        yield topic, producer.commit_transaction
    finally:
        await plain.stop()
        await producer.stop()
