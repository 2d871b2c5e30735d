"""The harness's own Kafka I/O (plain aiokafka): topics, input, outputs, expansion.

Nothing here is timed: the peers are measured by their own reports and the kernel's
accounting (`bench.peers.process`). Outputs are read ``read_committed``, so an
exactly-once peer is judged only by what it committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic

from framework.partitioner import partition_for_key

__all__ = ["OutputReader", "create_topics", "delete_topics_with", "expand_topic", "produce"]

BATCH_BYTES = 512 << 10


async def create_topics(bootstrap: str, topics: Mapping[str, int]) -> None:
    """Create each topic with its partition count (replication factor 1)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, count, 1) for name, count in topics.items()])
    finally:
        await admin.close()


async def delete_topics_with(bootstrap: str, marker: str) -> list[str]:
    """Delete every topic whose name contains ``marker`` (a run's own name): its input,
    output and whatever internal topics the peer created; returns their names."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        names = [name for name in await admin.list_topics() if marker in name]
        if names:
            await admin.delete_topics(names)
        return names
    finally:
        await admin.close()


async def expand_topic(bootstrap: str, topic: str, count: int) -> None:
    """CreatePartitions: grow ``topic`` to ``count`` partitions."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_partitions({topic: NewPartitions(total_count=count)})
    finally:
        await admin.close()


async def produce(bootstrap: str, topic: str, partitions: int,
                  records: Sequence[tuple[bytes, bytes]], *,
                  per_second: float | None = None) -> None:
    """Write ``records`` in order, each to its key's partition (Kafka's default
    partitioner over ``partitions``); ``per_second`` paces them (default: at once)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                enable_idempotence=True, max_batch_size=BATCH_BYTES,
                                max_request_size=1 << 20, linger_ms=5)
    await producer.start()
    try:
        await _knows_partitions(producer, topic, partitions)
        step = max(1, int(per_second / 20)) if per_second else 10_000
        started = time.monotonic()
        for at in range(0, len(records), step):
            await _send(producer, topic, partitions, records[at:at + step])
            if per_second:
                ahead = started + (at + step) / per_second - time.monotonic()
                if ahead > 0:
                    await asyncio.sleep(ahead)
    finally:
        await producer.stop()


async def _knows_partitions(producer: AIOKafkaProducer, topic: str, partitions: int,
                            timeout_s: float = 60.0) -> None:
    """Wait until ``producer``'s metadata lists ``partitions`` partitions of ``topic``:
    right after CreatePartitions a broker may still answer with the old count, and a send
    to a partition the metadata lacks fails ("Unrecognized partition")."""
    deadline = time.monotonic() + timeout_s
    while len(await producer.partitions_for(topic)) < partitions:
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic!r} still shows fewer than {partitions} "
                               f"partitions after {timeout_s:g} s")
        await producer.client.force_metadata_update()
        await asyncio.sleep(0.1)


async def _send(producer: AIOKafkaProducer, topic: str, partitions: int,
                records: Iterable[tuple[bytes, bytes]]) -> None:
    by_partition: dict[int, list[tuple[bytes, bytes]]] = {}
    for key, value in records:
        by_partition.setdefault(partition_for_key(key, partitions), []).append((key, value))
    pending = []
    for partition, items in by_partition.items():
        batch = producer.create_batch()
        for key, value in items:
            if batch.append(key=key, value=value, timestamp=None) is None:
                pending.append(await producer.send_batch(batch, topic, partition=partition))
                batch = producer.create_batch()
                batch.append(key=key, value=value, timestamp=None)
        pending.append(await producer.send_batch(batch, topic, partition=partition))
    await asyncio.gather(*pending)


class OutputReader:
    """Reads an output topic of ``partitions`` partitions ``read_committed`` from the
    start: key → totals in order.

    `follow` tails it in the background (the expansion runs watch progress with it);
    `drain` reads up to the end (last stable offset) of every partition.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int,
                 decode: Callable[[bytes], int] = int) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.decode = decode
        self.outputs: dict[str, list[int]] = {}
        self.received = 0
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> OutputReader:
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap,
                                    enable_auto_commit=False,
                                    isolation_level="read_committed",
                                    max_partition_fetch_bytes=4 << 20)
        await consumer.start()
        self._consumer = consumer
        tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop_following()
        if self._consumer is not None:
            await self._consumer.stop()

    async def _read_once(self, timeout_ms: int = 200) -> int:
        assert self._consumer is not None
        fetched = await self._consumer.getmany(timeout_ms=timeout_ms, max_records=50_000)
        count = 0
        for messages in fetched.values():
            for message in messages:
                key = message.key.decode() if message.key is not None else "<no key>"
                self.outputs.setdefault(key, []).append(self.decode(message.value))
            count += len(messages)
        self.received += count
        return count

    def follow(self) -> None:
        """Keep reading in the background until `stop_following` or `drain`."""
        async def loop() -> None:
            while True:
                await self._read_once()

        self._task = asyncio.create_task(loop())

    async def stop_following(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def drain(self, timeout_s: float = 120.0, settle_s: float = 10.0
                    ) -> dict[str, list[int]]:
        """Read every committed output (up to each partition's last stable offset, once
        the markers of committed transactions are written: see `_settled_ends`)."""
        await self.stop_following()
        assert self._consumer is not None
        tps = sorted(self._consumer.assignment(), key=lambda tp: tp.partition)
        ends = await self._settled_ends(tps, settle_s)
        deadline = time.monotonic() + timeout_s
        while [tp for tp in tps if await self._consumer.position(tp) < ends[tp]]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {self.topic} did not reach its end offsets "
                                   f"{ends} within {timeout_s:g}s")
            await self._read_once()
        return self.outputs

    async def _settled_ends(self, tps: list[TopicPartition], settle_s: float
                            ) -> dict[TopicPartition, int]:
        """The last stable offsets, read again (for at most ``settle_s``) until each
        equals its partition's high watermark. A transaction's commit returns before the
        broker writes its markers, so a peer that just exited after committing may leave
        its last transaction past the stable offset for a moment: a drain then came back
        short (a fresh-clone run saw 44 of 200 keys without outputs). A transaction still
        open after ``settle_s`` (a killed peer's) stays outside the ends."""
        assert self._consumer is not None
        high_reader = AIOKafkaConsumer(bootstrap_servers=self.bootstrap,
                                       enable_auto_commit=False)  # read_uncommitted
        await high_reader.start()
        try:
            deadline = time.monotonic() + settle_s
            while True:
                stable: dict[TopicPartition, int] = await self._consumer.end_offsets(tps)
                high = await high_reader.end_offsets(tps)
                if stable == high or time.monotonic() >= deadline:
                    return stable
                await asyncio.sleep(0.05)
        finally:
            await high_reader.stop()
