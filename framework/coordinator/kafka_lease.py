"""One coordinator per job on Kafka: the lease is membership of a consumer group.

Every `sampan run` of the job joins the group ``__sampan-<job>-coordinators`` subscribed
to the job's one-partition coordinator stream: the member that owns partition 0 holds the
lease. A second coordinator's join ends with nothing assigned, and it exits naming the
holder (which writes who it is to the coordinator stream). A holder that dies stops
heartbeating; Kafka removes it after the group's session timeout and the next join gets
the partition — Kafka's own group protocol, no lock to clean up.

On a broker that speaks KIP-848's consumer group protocol (Apache Kafka 4.0+) the members
heartbeat with ConsumerGroupHeartbeat (`framework.systems.kafka.membership`): the
broker assigns in its first answer, with no ``group.initial.rebalance.delay.ms`` (the
classic protocol's wait before the first rebalance of an empty group, 3 s by default), and
its uniform assignor keeps the partition with its owner. The session timeout is then the
broker's ``group.consumer.session.timeout.ms`` (45 s by default); a holder that died on
this host is removed at once instead (a leave sent with the member id it announced).
Elsewhere (tansu, older brokers, a group another sampan holds with the classic protocol)
the lease joins with the classic protocol through aiokafka, whose custom assignor does the
same (session ``max(lease_timeout_ms, 6000)``).
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
from aiokafka.errors import IncompatibleBrokerVersion, KafkaError

from framework.coordinator.lease import CoordinatorRunningError, Holder
from framework.errors import SampanError
from framework.systems.base import ProducerRecord
from framework.systems.kafka.denials import DENIALS
from framework.systems.kafka.membership import LEAVE_EPOCH, GroupMember, Heartbeat
from framework.systems.reading import read_range
from groupers import SystemStreamPartition

__all__ = ["KafkaCoordinatorLease"]

log = logging.getLogger(__name__)

HOLDER_KEY = b"lease"
"""The coordinator-stream key under which the lease holder says who it is."""

_CLASSIC_ONLY = {35, 69}
"""UNSUPPORTED_VERSION (the protocol is switched off), GROUP_ID_NOT_FOUND (the group is a
classic one the broker will not convert): join with the classic protocol instead."""

_GONE = {25, 110}
"""UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH: the broker removed this member from the group."""


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
        self._member: GroupMember | None = None
        self._protocol = "consumer"

    @property
    def group(self) -> str:
        return str(self.system.options.named(f"__sampan-{self.job}-coordinators"))

    @property
    def protocol(self) -> str:
        """``consumer`` (KIP-848) or ``classic``: how this lease is held (after `acquire`)."""
        return self._protocol

    async def acquire(self) -> None:
        """Join the group; hold the lease or raise `CoordinatorRunningError` naming its
        holder (after removing or waiting out a holder that is gone from this host)."""
        try:
            if await self._acquire_as_member():
                return
        except IncompatibleBrokerVersion:
            log.debug("the broker does not speak ConsumerGroupHeartbeat v1; the lease of job "
                      "%r uses the classic group protocol", self.job)
        self._member, self._protocol = None, "classic"
        await self._acquire_classic()

    async def _acquire_as_member(self) -> bool:
        """The lease through KIP-848's protocol; False when the broker wants the classic one."""
        client = await self.system.admin.client()
        member = GroupMember(client, self.group, self.system.admin.topic(self.topic),
                             rebalance_timeout_ms=max(6000, self.ttl_ms))
        self._member = member
        self.holder = Holder(self.holder.pid, self.holder.host, self.holder.since_ms,
                             member.member_id)
        patience_s = 3 * max(6000, self.ttl_ms) / 1000 + 60
        deadline = time.monotonic() + patience_s
        evicted: set[str] = set()
        while True:
            beat = await self._beat("joining the group of the job's coordinators (its lease)")
            if beat is None:
                return False
            if not member.owned:  # the assignment may take a heartbeat more to arrive
                for _ in range(3):
                    await asyncio.sleep(0.2)
                    if await self._beat("joining the lease group") is None:
                        return False
                    if member.owned:
                        break
            if member.owned:
                self.held = True
                await self._announce()
                return True
            other = await self._current_holder()
            if other is None or not other.gone():
                await self.release()
                raise CoordinatorRunningError(self._running(other))
            if other.member and other.member not in evicted:
                evicted.add(other.member)
                log.warning("the lease of job %r is held by coordinator pid %d, which is no "
                            "longer running; removing it from the group", self.job, other.pid)
                await GroupMember(client, self.group, member.topic, member.rebalance_timeout_ms,
                                  other.member).heartbeat(LEAVE_EPOCH)
            elif time.monotonic() > deadline:
                await self.release()
                raise SampanError(
                    f"job {self.job!r}: coordinator pid {other.pid}, no longer running, still "
                    f"holds the lease (group {self.group} on {self.system.bootstrap}) after "
                    f"{patience_s:.0f} s; check the broker's group.consumer.session.timeout.ms")
            else:  # a holder without a member id: Kafka expires it within its session
                await asyncio.sleep(1)

    async def _beat(self, doing: str) -> Heartbeat | None:
        """One heartbeat of the member; None when the broker wants the classic protocol."""
        assert self._member is not None
        try:
            beat: Heartbeat = await self.system.admin.bounded("ConsumerGroupHeartbeat",
                                                              self._member.heartbeat())
        except KafkaError as error:  # e.g. FindCoordinator of the group refused by an ACL
            refused = self.system.admin.refused(getattr(error, "errno", -1), "READ",
                                                self.group, doing)
            if refused is not None:
                raise refused from None
            raise
        if beat.error_code in _CLASSIC_ONLY:
            return None
        if beat.error_code:
            refused = self.system.admin.refused(beat.error_code, "READ", self.group, doing)
            if refused is not None:
                raise refused
            raise SampanError(
                f"job {self.job!r}: Kafka at {self.system.bootstrap} refused the heartbeat of "
                f"the coordinator lease (group {self.group}): error {beat.error_code} "
                f"({beat.error_message}); check the broker")
        return beat

    async def _acquire_classic(self) -> None:
        options = self.system.options
        session = max(6000, self.ttl_ms)
        kwargs = options.client_kwargs(self.system.bootstrap)
        # a broker may hold a JoinGroup up to the session (tansu: half of it), longer than a
        # short timeout_s: the join's requests wait past the session, as membership's do
        kwargs["request_timeout_ms"] = max(kwargs["request_timeout_ms"], session + 5000)
        self._consumer = AIOKafkaConsumer(
            **kwargs,
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
        if self._protocol == "consumer":
            return other.running(self.job, "Kafka expires its group membership within the "
                                 "broker's group.consumer.session.timeout.ms (45 s by default)")
        return other.running(self.job, f"Kafka expires its group membership within "
                                       f"{max(6000, self.ttl_ms) / 1000:g} s")

    async def keep(self, lost: asyncio.Event) -> None:
        """Stay in the group until cancelled; set ``lost`` if the partition goes elsewhere."""
        if self._member is not None:
            await self._keep_member(lost)
            return
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

    async def _keep_member(self, lost: asyncio.Event) -> None:
        """Heartbeat at the interval the broker asks (at most a third of the lease timeout);
        the lease is lost when the broker removed the member or took the partition."""
        member = self._member
        assert member is not None
        interval_s = self.ttl_ms / 3000
        while True:
            await asyncio.sleep(interval_s)
            try:
                beat = await self.system.admin.bounded("ConsumerGroupHeartbeat",
                                                       member.heartbeat())
            except (SampanError, KafkaError, OSError) as error:  # the next turn tries again
                log.warning("could not renew the lease of job %r: %s", self.job, error)
                continue
            interval_s = min(beat.interval_ms, self.ttl_ms / 3) / 1000
            if beat.error_code in _GONE or (beat.error_code == 0 and not member.owned):
                self.held = False
                log.error("lost the lease of job %r (Kafka %s)", self.job,
                          "gave it to another coordinator" if beat.error_code == 0 else
                          f"removed this coordinator from the group: {beat.error_message}")
                lost.set()
                return
            if beat.error_code:
                log.warning("could not renew the lease of job %r: error %d (%s)", self.job,
                            beat.error_code, beat.error_message)

    async def release(self) -> None:
        """Leave the group at once, so the next `sampan run` gets the lease without waiting."""
        member, self._member = self._member, None
        if member is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(member.heartbeat(LEAVE_EPOCH),
                                       self.system.options.timeout_s)
        consumer, self._consumer = self._consumer, None
        self.held = False
        if consumer is not None:
            with contextlib.suppress(Exception):
                await consumer.stop()
