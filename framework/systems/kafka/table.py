"""A one-partition compacted Kafka topic read as a table: the latest value per key.

Checkpoints and fences live in such topics. The table keeps its position, so each
refresh reads only what was appended since the last one; records of transactions still
open are left for a later refresh (read_committed).
"""

from __future__ import annotations

import asyncio
import time

from aiokafka import TopicPartition

from framework.systems.kafka.admin import KafkaAdmin
from framework.systems.kafka.consumer import KafkaConsumer
from groupers import SystemStreamPartition

__all__ = ["TopicTable"]

_BATCH = 10_000


class TopicTable:
    """The latest value of every key of partition 0 of ``topic`` (None = tombstone)."""

    def __init__(self, admin: KafkaAdmin, topic: str) -> None:
        self._admin = admin
        self.topic = topic
        self._latest: dict[bytes, bytes | None] = {}
        self._position = 0
        self._consumer: KafkaConsumer | None = None
        self._exists = False
        self._reading = asyncio.Lock()
        """One refresh at a time: a worker's fence check and its commit in flight share
        the table, and two reads on one consumer could apply an older record last."""

    async def refresh(self) -> dict[bytes, bytes | None]:
        """Read the topic up to its current end; a missing topic reads as empty."""
        async with self._reading:
            return await self._refresh()

    async def _refresh(self) -> dict[bytes, bytes | None]:
        if not self._exists:
            if self.topic not in await self._admin.topic_counts():
                return {}
            self._exists = True
        end = (await self._admin.offsets(self.topic))[0].end
        if self._position >= end:
            return self._latest
        if self._consumer is None:
            self._consumer = KafkaConsumer(self._admin)
        ssp = SystemStreamPartition(self._admin.system, self.topic, 0)
        self._consumer.assign({ssp: self._position})
        deadline = time.monotonic() + self._admin.options.timeout_s
        while self._position < end:
            records = (await self._consumer.fetch(max_records=_BATCH, timeout_ms=100)).get(
                ssp, ())
            for record in records:
                if record.key is not None:
                    self._latest[record.key] = record.value
                self._position = record.offset + 1
            if not records and await self._consumer.caught_up(ssp):
                break  # the rest is held by a transaction still open (read_committed)
            if self._position < end and time.monotonic() > deadline:
                raise self._admin.unavailable(
                    f"reading {TopicPartition(self.topic, 0)} up to offset {end}",
                    TimeoutError(f"stopped at offset {self._position}"),
                )
        return self._latest

    async def close(self) -> None:
        if self._consumer is not None:
            await self._consumer.close()
            self._consumer = None
