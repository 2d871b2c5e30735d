"""Producing on Kafka: rows straight into aiokafka batches, one open batch per partition.

`send_rows` places each row (Kafka's default partitioner on its key, memoized per key
for the call), appends it to its partition's open batch and sends a batch when it is
full; a worker's outputs come after the rows as `OutputColumns`, split by partition with
`Placement.group` and appended the same way. Then it waits for every acknowledgement.
No object is made per record on the way: rows are tuples (`ProducerRow`), and a
`RecordPosition` is built only for the leading rows whose positions the caller asked for
(a commit's changelog records).

The batch is filled through aiokafka's record builder directly (a third of the cost of
``BatchBuilder.append``, which adds two Python calls per record); `_direct` checks once
that the installed aiokafka still has the builder where this module expects it, and the
public ``append`` is used otherwise.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from operator import itemgetter
from typing import Any, cast

from aiokafka import AIOKafkaProducer
from aiokafka.producer.message_accumulator import BatchBuilder

from framework.errors import SampanError
from framework.frozen import fast_constructor
from framework.systems.base import OutputColumns, ProducerRecord, ProducerRow, RecordPosition
from framework.systems.kafka.admin import close_quietly
from framework.systems.kafka.aiokafka_private import (
    DIRECT_BUILDER,
    builder_append,
    sender_task,
    set_builder_count,
)
from framework.systems.placement import Placement

__all__ = ["KafkaPlacement", "send_rows", "stop_producer"]

_position = fast_constructor(RecordPosition)
_stream_of = itemgetter(0)
_NO_HEADERS: list[tuple[str, bytes]] = []  # only read by aiokafka's builder, never changed

Bounded = Callable[[str, Awaitable[Any]], Awaitable[Any]]
"""`KafkaAdmin.bounded`: an awaitable under the system's timeout, named for its error."""


class _OpenBatch:
    """A partition's batch being filled, and which of the wanted rows it holds."""

    __slots__ = ("append", "batch", "count", "members")

    def __init__(self, batch: BatchBuilder) -> None:
        self.batch = batch
        if DIRECT_BUILDER:
            self.append = builder_append(batch)
        else:
            def append(_offset: int, timestamp: int | None, key: bytes | None,
                       value: bytes | None, headers: list[tuple[str, bytes]]) -> object:
                return batch.append(timestamp=timestamp, key=key, value=value, headers=headers)

            self.append = append
        self.count = 0
        self.members: list[int] = []

    def close(self) -> BatchBuilder:
        if DIRECT_BUILDER:
            set_builder_count(self.batch, self.count)
        self.batch.close()
        return self.batch


async def send_rows(producer: AIOKafkaProducer, rows: Sequence[ProducerRow],
                    counts: dict[str, int], placement: Placement, bounded: Bounded,
                    positions: int | None = None,
                    columns: Sequence[OutputColumns] = (), namespace: str = "") -> tuple[
                        list[tuple[str, int, asyncio.Future[Any], list[int]]], int]:
    """Queue ``rows``, then ``columns`` (partition counts of their streams in ``counts``)
    as batches; returns (stream, partition, acknowledgement, indices of its wanted rows)
    per batch, in send order, and how many leading rows are wanted (``positions``, or
    all; never a column's record). A stream's topic is ``namespace`` + its name."""
    wanted = len(rows) if positions is None else min(positions, len(rows))
    sent: list[tuple[str, int, asyncio.Future[Any], list[int]]] = []
    open_batches: dict[str, list[_OpenBatch | None]] = {}
    memos: dict[str, dict[bytes, int]] = {}
    now = int(time.time() * 1000)  # the produce time of rows without a timestamp

    async def send(stream: str, partition: int, state: _OpenBatch) -> None:
        future = await bounded("produce", producer.send_batch(
            state.close(), namespace + stream, partition=partition))
        sent.append((stream, partition, future, state.members))

    last: str | None = None
    slots: list[_OpenBatch | None] = []
    memo: dict[bytes, int] = {}
    count = 0
    place = placement.row_partition
    known = memo.get
    for index, row in enumerate(rows):
        stream, key, value, partition, timestamp, headers = row
        if stream != last:
            count = counts[stream]
            slots = open_batches.setdefault(stream, [None] * count)
            memo = memos.setdefault(stream, {})
            known = memo.get
            last = stream
        # `Placement.row_partition`'s hot path inline (a hashed bytes key seen before);
        # anything else goes through it, which raises naming the stream
        found = None
        if partition is None and type(key) is bytes and (type(value) is bytes
                                                         or value is None):
            found = known(key)
        partition = place(row, count, memo) if found is None else found
        state = slots[partition]
        if state is None:
            state = slots[partition] = _OpenBatch(producer.create_batch())
        header_list = list(headers) if headers else _NO_HEADERS
        stamp = now if timestamp is None else timestamp
        if state.append(state.count, stamp, key, value, header_list) is None:  # full
            await send(stream, partition, state)
            state = slots[partition] = _OpenBatch(producer.create_batch())
            if state.append(0, stamp, key, value, header_list) is None:
                raise SampanError(f"a record for stream {stream!r} is larger than a whole "
                                  "batch; raise producer_batch_kb of its system")
        if index < wanted:
            state.members.append(index)
        state.count += 1
    for output in columns:
        stream = output.stream
        count = counts[stream]
        slots = open_batches.setdefault(stream, [None] * count)
        for partition, bucket in enumerate(placement.group(output, count)):
            if not bucket:
                continue
            state = slots[partition]
            if state is None:
                state = slots[partition] = _OpenBatch(producer.create_batch())
            append, at = state.append, state.count
            pairs = iter(bucket)
            for key, value in zip(pairs, pairs, strict=True):  # key, value, key, value ...
                if append(at, now, key, value, _NO_HEADERS) is None:  # full
                    state.count = at
                    await send(stream, partition, state)
                    state = slots[partition] = _OpenBatch(producer.create_batch())
                    append, at = state.append, 0
                    if append(0, now, key, value, _NO_HEADERS) is None:
                        raise SampanError(f"a record for stream {stream!r} is larger than a "
                                          "whole batch; raise producer_batch_kb of its system")
                at += 1
            state.count = at
    for stream, batches in open_batches.items():
        for partition, state in enumerate(batches):
            if state is not None:
                await send(stream, partition, state)
    return sent, wanted


class KafkaPlacement(Placement):
    """`Placement` for Kafka, which cannot store a record with neither key nor value."""

    def partition(self, record: ProducerRecord, count: int) -> int:
        if record.key is None and record.value is None:
            raise SampanError(f"record for stream {record.stream!r} has neither key nor value; "
                              "Kafka cannot store it")
        return super().partition(record, count)


def positions_of(sent: Sequence[tuple[str, int, asyncio.Future[Any], list[int]]],
                 landed: Sequence[Any], wanted: int) -> list[RecordPosition]:
    """Where each wanted row landed, from each batch's acknowledged base offset."""
    where: list[RecordPosition | None] = [None] * wanted
    for (stream, _, _, members), metadata in zip(sent, landed, strict=True):
        partition, base = metadata.partition, metadata.offset
        for relative, index in enumerate(members):
            where[index] = _position(stream, partition, base + relative)
    return cast(list[RecordPosition], where)


def streams_of(rows: Sequence[ProducerRow]) -> list[str]:
    """The streams ``rows`` write to, sorted."""
    return sorted(set(map(_stream_of, rows)))


async def stop_producer(producer: AIOKafkaProducer, timeout_s: float) -> None:
    """Stop ``producer``: deliver what it holds within ``timeout_s``, else drop it (a broker
    that does not answer would keep aiokafka's flush waiting for good). A commit whose
    records are dropped this way was never acknowledged, so nothing of it counts."""
    stopping = asyncio.ensure_future(producer.stop())
    await close_quietly(asyncio.shield(stopping), timeout_s)
    if not stopping.done():
        task = sender_task(producer)
        if task is not None and not task.done():
            task.cancel()  # `stop` then ends too: it waits for the accumulator or this task
        await close_quietly(stopping, timeout_s)
    if stopping.done() and not stopping.cancelled():
        stopping.exception()  # seen: what a dropped producer says is not news
