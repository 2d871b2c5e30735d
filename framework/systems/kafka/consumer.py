"""A `Consumer` over aiokafka with manual assignment (no consumer group).

Positions are sampan's, not the broker's: `assign` seeks every partition, nothing is
committed to Kafka. Reads are read_committed: the broker answers up to the last stable
offset and lists aborted transactions; `kafka.txn_filter` keeps the control batches, so
a position moves past a transaction's COMMIT/ABORT marker (and would hold the rule on a
broker whose Fetch ignored the isolation level).
Partitions that do not exist yet are left out of the aiokafka
assignment (so the broker is never asked about them, and never auto-creates them) and
re-checked every second; until they appear they yield nothing, as on the local system.

With the partition counts a worker's job model was built for (`expect_partition_counts`),
every fetch that returned records of those streams is followed by a metadata read before
the records are handed out: once a stream has more partitions than expected, its records
(those of that fetch included) are no longer handed out — Kafka keeps no record of the
offset where a topic grew, so the reader stops where it noticed, after the records a
clean check let through. The worker then waits for the model of the new count.

A position the broker no longer holds (the topic's retention deleted those records before
this job read them) is not reset silently: one warning names the stream, the partition
and the offsets lost to the job, then reading goes on from the oldest record left.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import OffsetOutOfRangeError

from framework.systems.base import Record, as_record
from framework.systems.fetched import FetchedColumns
from framework.systems.kafka.admin import KafkaAdmin, close_quietly, stop_consumer
from framework.systems.kafka.denials import DENIALS
from framework.systems.kafka.fetch_columns import FetchedChunks, merged
from framework.systems.kafka.txn_filter import CommittedFilter, install, keep_control_batches
from groupers import SystemStreamPartition

__all__ = ["KafkaConsumer"]

_RECHECK_MISSING_S = 1.0
log = logging.getLogger(__name__)
Fetched = dict[TopicPartition, FetchedChunks]
"""What ``getmany`` hands a consumer `keep_control_batches` marked (`kafka.txn_filter`)."""

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
        self._expected: dict[str, int] = {}
        self.grown: dict[str, int] = {}
        """Stream → the partition count it was seen to have grown to (read no more)."""

    def expect_partition_counts(self, counts: Mapping[str, int]) -> None:
        """Stop handing out a stream's records once it is seen to have more partitions
        than ``counts`` says (see the module docstring)."""
        self._expected = dict(counts)
        self.grown = {}
        self._dirty = True

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
    ) -> Mapping[SystemStreamPartition, FetchedColumns]:
        """`fetch` without an object per record: each partition's committed records as
        columns (`FetchedColumns`, cut from the fetched batches by
        `kafka.fetch_columns`), for the worker's hot path."""
        if self._closed:
            raise RuntimeError("fetch on a closed KafkaConsumer; create a new consumer")
        missing = len(self._active) < len(self._positions)
        if self._dirty or (missing and time.monotonic() - self._checked_at > _RECHECK_MISSING_S):
            await self._apply_assignment()
        if not self._active or max_records < 1:
            await asyncio.sleep(timeout_ms / 1000)
            return {}
        assert self._consumer is not None
        try:
            fetched = await self._consumer.getmany(
                *self._active, timeout_ms=timeout_ms, max_records=max_records
            )
        except DENIALS as error:
            raise self._admin.denial(error, "READ", "", "reading the job's inputs and "
                                     "changelogs") from error
        except OffsetOutOfRangeError as error:
            await self._past_retention(dict(error.args[0]) if error.args else {})
            return {}
        if self._expected and any(
                messages and self._stream(tp) in self._expected
                for tp, messages in fetched.items()):
            fetched = await self._unless_grown(fetched)
        result: dict[SystemStreamPartition, FetchedColumns] = {}
        for tp, taken in fetched.items():
            if not taken or tp not in self._ssps:
                continue
            committed = self._filters.setdefault(tp, CommittedFilter())
            released = merged(committed.release(taken.chunks))
            holding = committed.holding
            # Re-seeking (a later `_apply_assignment`) must re-read what is still held.
            self._positions[tp] = holding if holding is not None else taken.end
            if released is not None:
                result[self._ssps[tp]] = released
        return result

    async def _unless_grown(self, fetched: Fetched) -> Fetched:
        """``fetched`` without the records of streams fresh metadata shows grown past
        their expected count (their positions stay before those records)."""
        counts = await self._admin.topic_counts()
        grown = {stream: counts[stream] for stream, expected in self._expected.items()
                 if counts.get(stream, 0) > expected}
        if not grown:
            return fetched
        if grown.keys() - self.grown.keys():
            log.info("input topics grew past the job model's partition counts (%s): "
                     "reading them no further until the model of the new counts",
                     ", ".join(f"{t}: {self._expected[t]} → {n}"
                               for t, n in sorted(grown.items())))
        self.grown.update(grown)
        self._dirty = True  # reassign without them
        return {tp: messages for tp, messages in fetched.items()
                if self._stream(tp) not in grown}

    async def _past_retention(self, positions: Mapping[TopicPartition, int]) -> None:
        """Move each position the broker no longer holds to the oldest record left, with
        one warning each: the records in between were deleted before this job read them."""
        assert self._consumer is not None
        oldest = await self._consumer.beginning_offsets(list(positions))
        newest = await self._consumer.end_offsets(list(positions))
        for tp, position in sorted(positions.items()):
            start = int(oldest[tp])
            if start <= position <= int(newest[tp]):
                continue  # in the log again (a leader's answer of a moment): read it
            ssp = self._ssps.get(tp)
            where = (f"{ssp.system}.{ssp.stream} partition {ssp.partition}" if ssp else
                     f"topic {tp.topic} partition {tp.partition}")
            if position < start:
                log.warning("%s: offsets %d–%d were deleted by the topic's retention before "
                            "this job read them (%d record%s lost to it); reading on from "
                            "offset %d — raise the topic's retention.ms/retention.bytes so "
                            "it keeps what a stopped or lagging job has not read", where,
                            position, start - 1, start - position,
                            "" if start - position == 1 else "s", start)
            else:
                log.warning("%s: offset %d is past the end of the partition (the topic "
                            "was recreated or truncated); reading on from its oldest "
                            "record, offset %d", where, position, start)
            self._positions[tp] = start
            self._filters.pop(tp, None)
            self._consumer.seek(tp, start)

    def _stream(self, tp: TopicPartition) -> str | None:
        ssp = self._ssps.get(tp)
        return None if ssp is None else ssp.stream

    async def read_to_end(
        self, ssps: Sequence[SystemStreamPartition]
    ) -> set[SystemStreamPartition]:
        """The partitions of ``ssps`` handed out up to their last stable offset now (one
        ListOffsets, read_committed): a fetch bringing nothing of a partition does not
        say that, as aiokafka fetches ahead in the background."""
        topic = self._admin.topic
        wanted = {TopicPartition(topic(s.stream), s.partition): s for s in ssps}
        wanted = {tp: s for tp, s in wanted.items() if tp in self._active}
        if self._consumer is None or not wanted:
            return set()
        ends = await self._admin.bounded("ListOffsets",
                                         self._consumer.end_offsets(list(wanted)))
        return {ssp for tp, ssp in wanted.items()
                if tp in ends and self._positions.get(tp, 0) >= ends[tp]}

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
                auto_offset_reset="none",  # a position outside the log: _past_retention
                isolation_level="read_committed",
                max_partition_fetch_bytes=self._admin.options.fetch_partition_kb << 10,
                **self._admin.options.client_kwargs(self._admin.bootstrap),
            )
            try:
                await self._admin.connect(consumer.start())
            except BaseException:
                await close_quietly(stop_consumer(consumer), self._admin.options.timeout_s)
                raise
            keep_control_batches(consumer)
            self._consumer = consumer
        self._checked_at = time.monotonic()
        self._dirty = False
        counts = await self._admin.topic_counts(max_age_s=_RECHECK_MISSING_S)
        active = sorted(tp for tp, ssp in self._ssps.items()
                        if tp.partition < counts.get(ssp.stream, 0)
                        and ssp.stream not in self.grown)
        self._consumer.assign(active)
        self._filters.clear()
        for tp in active:
            self._consumer.seek(tp, self._positions[tp])
        self._active = active

    async def close(self) -> None:
        self._closed = True
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await close_quietly(stop_consumer(consumer), self._admin.options.timeout_s)
