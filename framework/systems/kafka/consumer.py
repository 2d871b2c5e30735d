"""A `Consumer` over aiokafka with manual assignment (no consumer group).

Positions are sampan's, not the broker's: `assign` seeks every partition, nothing is
committed to Kafka. Reads are read_committed, applied by `kafka.txn_filter` from the
log's control batches (so they hold on brokers whose Fetch ignores the isolation level).
Partitions that do not exist yet are left out of the aiokafka
assignment (so the broker is never asked about them, and never auto-creates them) and
re-checked every second; until they appear they yield nothing, as on the local system.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence

from aiokafka import AIOKafkaConsumer, TopicPartition

from framework.systems.base import FetchedRecord, Record, as_record
from framework.systems.kafka.admin import KafkaAdmin, stop_consumer
from framework.systems.kafka.txn_filter import CommittedFilter, install
from groupers import SystemStreamPartition

__all__ = ["KafkaConsumer"]

_RECHECK_MISSING_S = 1.0

install()


class KafkaConsumer:
    """Reads assigned partitions of one Kafka cluster from sampan's positions."""

    def __init__(self, admin: KafkaAdmin) -> None:
        self._admin = admin
        self._consumer: AIOKafkaConsumer | None = None
        self._ssps: dict[TopicPartition, SystemStreamPartition] = {}
        self._positions: dict[TopicPartition, int] = {}
        self._active: list[TopicPartition] = []
        self._filters: dict[TopicPartition, CommittedFilter] = {}
        self._dirty = False
        self._checked_at = float("-inf")
        self._closed = False

    def expect_partition_counts(self, counts: Mapping[str, int]) -> None:
        """Ignored: Kafka keeps no record of where a topic grew."""

    def assign(self, positions: Mapping[SystemStreamPartition, int]) -> None:
        topic = self._admin.topic
        self._ssps = {TopicPartition(topic(s.stream), s.partition): s for s in positions}
        self._positions = {
            TopicPartition(topic(s.stream), s.partition): offset
            for s, offset in positions.items()
        }
        self._dirty = True

    async def fetch(
        self, max_records: int = 1000, timeout_ms: int = 100
    ) -> Mapping[SystemStreamPartition, Sequence[Record]]:
        fetched = await self.fetch_raw(max_records, timeout_ms)
        return {ssp: [as_record(ssp.partition, record) for record in records]
                for ssp, records in fetched.items()}

    async def fetch_raw(
        self, max_records: int = 1000, timeout_ms: int = 100
    ) -> Mapping[SystemStreamPartition, Sequence[FetchedRecord]]:
        """`fetch` without a copy per record: the committed records as aiokafka unpacked
        them (`FetchedRecord`s), for the worker's hot path."""
        if self._closed:
            raise RuntimeError("fetch on a closed KafkaConsumer; create a new consumer")
        missing = len(self._active) < len(self._positions)
        if self._dirty or (missing and time.monotonic() - self._checked_at > _RECHECK_MISSING_S):
            await self._apply_assignment()
        if not self._active or max_records < 1:
            await asyncio.sleep(timeout_ms / 1000)
            return {}
        assert self._consumer is not None
        fetched = await self._consumer.getmany(
            *self._active, timeout_ms=timeout_ms, max_records=max_records
        )
        result: dict[SystemStreamPartition, list[FetchedRecord]] = {}
        for tp, messages in fetched.items():
            if not messages or tp not in self._ssps:
                continue
            committed = self._filters.setdefault(tp, CommittedFilter())
            released = committed.release(messages)
            holding = committed.holding
            # Re-seeking (a later `_apply_assignment`) must re-read what is still held.
            self._positions[tp] = holding if holding is not None else messages[-1].offset + 1
            if released:
                result[self._ssps[tp]] = released
        return result

    async def caught_up(self, ssp: SystemStreamPartition) -> bool:
        """Whether everything up to the high watermark of the last fetch was read: what
        is still held then belongs to transactions that are open."""
        tp = TopicPartition(self._admin.topic(ssp.stream), ssp.partition)
        if self._consumer is None or tp not in self._active:
            return False
        high = self._consumer.highwater(tp)
        return high is not None and await self._consumer.position(tp) >= high

    async def _apply_assignment(self) -> None:
        if self._consumer is None:
            consumer = AIOKafkaConsumer(
                enable_auto_commit=False,
                # Only reached when a position is outside the retained log (retention
                # deleted it): continue from the oldest record still there.
                auto_offset_reset="earliest",
                isolation_level="read_committed",
                max_partition_fetch_bytes=self._admin.options.fetch_partition_kb << 10,
                **self._admin.options.client_kwargs(self._admin.bootstrap),
            )
            try:
                await self._admin.bounded("connect", consumer.start())
            except BaseException:
                await stop_consumer(consumer)
                raise
            self._consumer = consumer
        self._checked_at = time.monotonic()
        self._dirty = False
        counts = await self._admin.topic_counts(max_age_s=_RECHECK_MISSING_S)
        active = sorted(tp for tp, ssp in self._ssps.items()
                        if tp.partition < counts.get(ssp.stream, 0))
        self._consumer.assign(active)
        self._filters.clear()
        for tp in active:
            self._consumer.seek(tp, self._positions[tp])
        self._active = active

    async def close(self) -> None:
        self._closed = True
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await stop_consumer(consumer)
