"""What plain aiokafka alone reaches on the sum job's input: the ceiling for any worker.

Both loops read the input topic with ``getmany`` and write one output record per input
record through ``create_batch``/``send_batch`` (batches of `BATCH_BYTES`, as the kafka
system's producer), all on one event loop in one process, like one worker:

- pass-through: copy each record's key and value to the output, no decoding;
- minimal sum: decode the JSON value, add it to a dict of totals, encode the total as
  JSON and send it — the per-key sum with no task API, store, changelog or checkpoint.

A framework worker runs the same job with more work per record, so it cannot be faster
than the minimal sum. Used by `bench.worker`; not a test.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

BATCH_BYTES = 512 << 10

Transform = Callable[[bytes, bytes], bytes]


def pass_through() -> Transform:
    """The output value is the input value."""
    return lambda key, value: value


def minimal_sum(loads: Callable[[bytes], Any] = json.loads,
                dumps: Callable[[Any], str | bytes] = json.dumps) -> Transform:
    """The output value is the key's running total of ``value["amount"]``, as JSON."""
    totals: dict[bytes, int] = {}

    def step(key: bytes, value: bytes) -> bytes:
        total = totals.get(key, 0) + loads(value)["amount"]
        totals[key] = total
        encoded = dumps(total)
        return encoded if type(encoded) is bytes else encoded.encode()  # type: ignore[union-attr]

    return step


async def rate(bootstrap: str, topic: str, partitions: int, output: str, count: int,
               transform: Transform) -> float:
    """Records/s of reading ``count`` records of ``topic`` and producing one output each."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                max_batch_size=BATCH_BYTES, max_request_size=1 << 20)
    await consumer.start()
    await producer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        started = time.perf_counter()
        seen = 0
        pending: list[asyncio.Future[Any]] = []
        while seen < count:
            fetched = await consumer.getmany(timeout_ms=1_000, max_records=10_000)
            for tp, messages in fetched.items():
                seen += len(messages)
                batch = producer.create_batch()
                for message in messages:
                    value = transform(message.key, message.value)
                    if batch.append(key=message.key, value=value, timestamp=None) is None:
                        pending.append(await producer.send_batch(batch, output,
                                                                 partition=tp.partition))
                        batch = producer.create_batch()
                        batch.append(key=message.key, value=value, timestamp=None)
                pending.append(await producer.send_batch(batch, output, partition=tp.partition))
            done = [future for future in pending if future.done()]
            await asyncio.gather(*done)
            pending = [future for future in pending if not future.done()]
        await asyncio.gather(*pending)
        return seen / (time.perf_counter() - started)
    finally:
        await consumer.stop()
        await producer.stop()
