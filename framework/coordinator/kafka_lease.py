"""One coordinator per job on Kafka: the lease is membership of a consumer group.

Every `sampan run` of the job joins the group ``__sampan-<job>-coordinators`` subscribed
to the job's one-partition coordinator stream. The group's assignor gives that partition
to the member that already holds it (or, when nobody does, to the member waiting
longest): the holder of partition 0 holds the lease. A second coordinator's join ends
with nothing assigned, and it exits naming the holder (which writes who it is to the
coordinator stream). A holder that dies stops heartbeating; after the group's session
timeout (``coordinator.lease_timeout_ms``) Kafka removes it and the next join hands the
lease on — Kafka's own group protocol, no lock to clean up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from framework.coordinator.lease import CoordinatorRunningError, Holder
from framework.errors import SampanError
from framework.systems.base import ProducerRecord
from framework.systems.kafka.denials import DENIALS
from framework.systems.reading import read_range
from groupers import SystemStreamPartition

__all__ = ["KafkaCoordinatorLease"]

log = logging.getLogger(__name__)

HOLDER_KEY = b"lease"
"""The coordinator-stream key under which the lease holder says who it is."""


def _lease_assignor(holds: list[bool], since_ms: int) -> type[AbstractPartitionAssignor]:
    """An assignor class for one consumer (aiokafka calls strategies as classes): the
    partition stays with its holder; without one it goes to the earliest waiting member."""

    class LeaseAssignor(AbstractPartitionAssignor):  # type: ignore[misc]
        name = "sampan-lease"
        version = 0
        _holds: ClassVar[list[bool]] = holds

        @classmethod
        def metadata(cls, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
            data = json.dumps({"holds": cls._holds[0], "since_ms": since_ms}).encode()
            return ConsumerProtocolMemberMetadata(cls.version, sorted(topics), data)

        @classmethod
        def assign(cls, cluster: Any, members: Mapping[str, ConsumerProtocolMemberMetadata]
                   ) -> dict[str, ConsumerProtocolMemberAssignment]:
            def rank(member: str) -> tuple[int, int, str]:
                try:
                    data = json.loads(members[member].user_data or b"{}")
                except ValueError:
                    data = {}
                return (0 if data.get("holds") else 1, int(data.get("since_ms", 0)), member)

            winner = min(members, key=rank)
            topics = sorted({t for m in members.values() for t in m.subscription})
            return {
                member: ConsumerProtocolMemberAssignment(
                    cls.version, [(t, [0]) for t in topics] if member == winner else [], b"")
                for member in members}

        @classmethod
        def on_assignment(cls, assignment: ConsumerProtocolMemberAssignment) -> None:
            cls._holds[0] = bool(assignment.partitions())

    return LeaseAssignor


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, changed: asyncio.Event) -> None:
        self.changed = changed
        self.assigned: set[TopicPartition] | None = None

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        return None

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.assigned = set(assigned)
        self.changed.set()


class KafkaCoordinatorLease:
    """The lease of one job on a Kafka metadata system (see the module doc)."""

    def __init__(self, system: Any, job: str, topic: str, ttl_ms: int) -> None:
        self.system = system
        self.job = job
        self.topic = topic
        self.ttl_ms = ttl_ms
        self.holder = Holder(os.getpid(), socket.gethostname(), int(time.time() * 1000))
        self.held = False
        self._holds = [False]
        self._changed = asyncio.Event()
        self._listener = _Listener(self._changed)
        self._consumer: AIOKafkaConsumer | None = None

    async def acquire(self) -> None:
        """Join the group; hold the lease or raise `CoordinatorRunningError` naming its
        holder (after waiting for it to expire when that holder is gone from this host)."""
        options = self.system.options
        session = max(6000, self.ttl_ms)
        self._consumer = AIOKafkaConsumer(
            **options.client_kwargs(self.system.bootstrap),
            group_id=options.named(f"__sampan-{self.job}-coordinators"),
            enable_auto_commit=False,
            session_timeout_ms=session, heartbeat_interval_ms=max(1000, session // 3),
            rebalance_timeout_ms=session, max_poll_interval_ms=max(session * 3, 30000),
            partition_assignment_strategy=(_lease_assignor(self._holds, self.holder.since_ms),))
        await self.system.admin.connect(self._consumer.start())
        self._consumer.subscribe([self.system.admin.topic(self.topic)], listener=self._listener)
        deadline = time.monotonic() + 3 * session / 1000 + 30
        waited = False
        while True:
            if await self._joined(deadline):
                self.held = True
                await self._announce()
                return
            other = await self._current_holder()
            if other is None or not other.gone():
                await self.release()
                raise CoordinatorRunningError(self._running(other))
            if not waited:  # its holder died on this host: Kafka expires it within a timeout
                log.warning("the lease of job %r is held by coordinator pid %d, which is no "
                            "longer running; waiting up to %.0f s for Kafka to expire it",
                            self.job, other.pid, session / 1000)
                waited = True

    async def _joined(self, deadline: float) -> bool:
        """Poll until a join round ended; True when it gave this member the partition."""
        assert self._consumer is not None
        self._changed.clear()
        while not self._changed.is_set():
            if time.monotonic() > deadline:
                await self.release()
                raise SampanError(
                    f"job {self.job!r}: no answer from Kafka's group coordinator at "
                    f"{self.system.bootstrap} for the coordinator lease; check the broker")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._poll(), 1)
        return bool(self._listener.assigned)

    async def _poll(self) -> None:
        assert self._consumer is not None
        for partition in self._consumer.assignment():
            self._consumer.pause(partition)  # a poll for membership, never for records
        try:
            await self._consumer.getmany(timeout_ms=200)
        except DENIALS as error:
            raise self.system.admin.denial(
                error, "READ", self.system.options.named(f"__sampan-{self.job}-coordinators"),
                "joining the group of the job's coordinators (its lease)") from error

    async def _announce(self) -> None:
        value = self.holder.to_json().encode()
        await self.system.produce([ProducerRecord(self.topic, HOLDER_KEY, value, partition=0)])

    async def _current_holder(self) -> Holder | None:
        """Who holds the lease, as it announced itself (a holder that just joined may not
        have yet: asked again for up to a few seconds); None when nobody says."""
        ssp = SystemStreamPartition(self.system.name, self.topic, 0)
        for _ in range(20):
            span = (await self.system.offsets(self.topic))[0]
            found = None
            async for batch in read_range(self.system, ssp, span.oldest, span.end):
                for record in batch:
                    if record.key == HOLDER_KEY and record.value is not None:
                        found = Holder.from_json(record.value.decode())
            if found is not None and found.since_ms <= self.holder.since_ms:
                return found
            await asyncio.sleep(0.25)
        return None

    def _running(self, other: Holder | None) -> str:
        if other is None:
            return (f"job {self.job!r} is already running: another coordinator holds its "
                    f"lease (group __sampan-{self.job}-coordinators on "
                    f"{self.system.bootstrap}) and has not said who it is yet; stop it first, "
                    f"then run again")
        return other.running(self.job, f"Kafka expires its group membership within "
                                       f"{max(6000, self.ttl_ms) / 1000:g} s")

    async def keep(self, lost: asyncio.Event) -> None:
        """Stay in the group until cancelled; set ``lost`` if the partition goes elsewhere."""
        while True:
            await self._poll()
            if self._changed.is_set():
                self._changed.clear()
                if not self._listener.assigned:
                    self.held = False
                    log.error("lost the lease of job %r (Kafka gave it to another "
                              "coordinator)", self.job)
                    lost.set()
                    return
            await asyncio.sleep(self.ttl_ms / 6000)

    async def release(self) -> None:
        """Leave the group at once, so the next `sampan run` gets the lease without waiting."""
        consumer, self._consumer = self._consumer, None
        self.held = False
        if consumer is not None:
            with contextlib.suppress(Exception):
                await consumer.stop()
