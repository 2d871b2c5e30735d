"""Every use of aiokafka's private attributes, in one module: the hooks aiokafka offers no
public call for (a batch's record builder, a transactional producer's id, a read_committed
fetcher that keeps control batches and hands out columns, a consumer group's rejoin and
leave, closing a client whose ``stop`` was cancelled). pyproject.toml pins the aiokafka
releases they were checked against; a release without one fails where it is reached,
naming what is missing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.consumer.fetcher import FetchResult
from aiokafka.producer.message_accumulator import BatchBuilder

__all__ = [
    "COORDINATOR_HOOKS",
    "DIRECT_BUILDER",
    "builder_append",
    "close_client",
    "fetch_error",
    "fetcher_isolation_level",
    "group_coordinator_of",
    "hand_out_takes",
    "know_leaders",
    "missing_coordinator_hooks",
    "replace_leave_group",
    "sender_task",
    "set_builder_count",
    "set_fetcher_isolation_level",
    "transaction_error",
    "txn_manager",
]


def _direct_builder() -> bool:
    """Whether aiokafka's `BatchBuilder` keeps its record builder in ``_builder`` and its
    record count in ``_relative_offset`` (true of aiokafka 0.8 to 0.14 at least)."""
    try:
        probe = BatchBuilder(1 << 10, 0)
        return callable(probe._builder.append) and probe._relative_offset == 0
    except Exception:  # pragma: no cover - another aiokafka layout: the public API
        return False


DIRECT_BUILDER = _direct_builder()
"""`builder_append` and `set_builder_count` work on this aiokafka: a batch is filled
through its record builder, without `BatchBuilder.append`'s checks per record."""


def builder_append(batch: BatchBuilder) -> Callable[..., object]:
    """``batch``'s record builder's ``append(offset, timestamp, key, value, headers)``
    (only where `DIRECT_BUILDER`)."""
    append: Callable[..., object] = batch._builder.append
    return append


def set_builder_count(batch: BatchBuilder, count: int) -> None:
    """Record that ``count`` records went in through `builder_append`, as
    `BatchBuilder.append` would have (only where `DIRECT_BUILDER`)."""
    batch._relative_offset = count


def sender_task(producer: AIOKafkaProducer) -> asyncio.Task[Any] | None:
    """The task of ``producer``'s sender, which a stuck ``stop`` waits for."""
    task: asyncio.Task[Any] | None = getattr(getattr(producer, "_sender", None),
                                             "sender_task", None)
    return task


async def close_client(consumer: AIOKafkaConsumer) -> None:
    """Close ``consumer``'s network client (its ``stop`` was cancelled half way)."""
    await consumer._client.close()


def txn_manager(producer: AIOKafkaProducer) -> Any:
    """``producer``'s transaction manager: its producer id and epoch, and whether its
    transaction failed or is open, are kept only there."""
    return producer._txn_manager


def transaction_error(producer: AIOKafkaProducer) -> BaseException | None:
    """Why ``producer``'s current transaction failed, if it did: a partition the broker
    would not add (AddPartitionsToTxn) is told only there; the send itself then fails with
    a bare InvalidTxnState."""
    manager = getattr(producer, "_txn_manager", None)
    waiter = getattr(manager, "_transaction_waiter", None)
    if isinstance(waiter, asyncio.Future) and waiter.done() and not waiter.cancelled():
        return waiter.exception()
    return None


def fetch_error(consumer: AIOKafkaConsumer, partition: object) -> BaseException | None:
    """The error ``consumer``'s fetcher holds for ``partition`` (a refused fetch, which
    `getmany` would raise), without taking any record."""
    fetcher = getattr(consumer, "_fetcher", None)
    held = getattr(fetcher, "_records", {}).get(partition) if fetcher is not None else None
    error = getattr(held, "_error", None)
    return error if isinstance(error, BaseException) else None


def fetcher_isolation_level(consumer: AIOKafkaConsumer) -> object | None:
    """The isolation level ``consumer``'s fetcher unpacks with; None before it started."""
    fetcher = consumer._fetcher
    return None if fetcher is None else fetcher._isolation_level


def set_fetcher_isolation_level(consumer: AIOKafkaConsumer, level: object) -> None:
    """Make ``consumer``'s (started) fetcher unpack with ``level``."""
    consumer._fetcher._isolation_level = level


COORDINATOR_HOOKS = ("request_rejoin", "_maybe_leave_group")
"""What the hosts need of aiokafka's group coordinator (`group_coordinator_of`)."""


def group_coordinator_of(consumer: object) -> Any | None:
    """``consumer``'s group coordinator (None when this aiokafka has none there)."""
    return getattr(consumer, "_coordinator", None)


def missing_coordinator_hooks(coordinator: object) -> list[str]:
    """The `COORDINATOR_HOOKS` ``coordinator`` lacks."""
    return [hook for hook in COORDINATOR_HOOKS
            if not callable(getattr(coordinator, hook, None))]


def replace_leave_group(coordinator: Any,
                        leave: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
    """Make ``coordinator`` call ``leave`` where it would send LeaveGroup; returns the
    call that sends it."""
    send_leave: Callable[[], Awaitable[None]] = coordinator._maybe_leave_group
    coordinator._maybe_leave_group = leave
    return send_leave


_aiokafka_getall = FetchResult.getall


def hand_out_takes(columnar: Callable[[object], bool]) -> None:
    """Make ``getmany`` hand out, for each partition whose unpacked records ``columnar``
    accepts, their ``take(max_records)`` (what to hand out, whether every record was
    taken) instead of a list of records; aiokafka's own ``getall`` for the others.
    Idempotent."""

    def getall(self: Any, max_records: int | None = None) -> Any:
        records = self._partition_records
        if records is None or not columnar(records):
            return _aiokafka_getall(self, max_records)
        if not self.check_assignment(self._topic_partition):
            return []
        taken, done = records.take(max_records)
        self._update_position()
        if done:
            self._partition_records = None
        return taken

    FetchResult.getall = getall


async def know_leaders(consumer: AIOKafkaConsumer, partitions: Collection[TopicPartition]
                       ) -> None:
    """Refresh ``consumer``'s metadata when it names no leader for one of ``partitions``.

    Asked for the offsets of a partition it does not know (a topic created since its last
    metadata), aiokafka requests metadata and sleeps its retry backoff (100 ms) before it
    asks again; a start reads several just-created topics, one after another."""
    client = consumer._client
    unknown = {tp.topic for tp in partitions
               if client.cluster.leader_for_partition(tp) in (None, -1)}
    if unknown:
        for topic in unknown:
            client.add_topic(topic)
        await client.force_metadata_update()
