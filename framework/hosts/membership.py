"""A host's membership of its job's group, through Kafka's own group protocol (aiokafka).

Every host of job ``J`` joins the consumer group ``__sampan-J-hosts`` subscribed to the
job's coordinator stream (no partition is ever handed out: the group is for membership).
The protocol is eager, as Kafka Streams' was before KIP-429: on every rebalance each host
first stops what it runs (``on_revoked``), then joins with its `Member` metadata; the
leader's assignor builds and publishes the next model and answers each member; each host
then starts what the model places on it (``on_assigned``). A host that dies stops
heartbeating and is removed after ``coordinator.session_timeout_ms``; one that stops
cleanly leaves the group at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from framework.hosts.member import Answer, Member

__all__ = ["Membership", "group_id"]

log = logging.getLogger(__name__)

Lead = Callable[[Mapping[str, Member]], Mapping[str, Answer]]
"""The leader's step: member id → `Member` in, member id → `Answer` out (synchronous)."""


def group_id(job: str) -> str:
    """The Kafka consumer group of job ``job``'s hosts."""
    return f"__sampan-{job}-hosts"


class _Round:
    """What one consumer's assignor knows: this host's metadata and the last answer."""

    def __init__(self, member: Member, lead: Lead) -> None:
        self.member = member
        self.lead = lead
        self.answer: Answer | None = None
        self.leader = False


def _assignor(state: _Round) -> type[AbstractPartitionAssignor]:
    """One assignor class per consumer (aiokafka calls strategies as classes)."""

    class HostAssignor(AbstractPartitionAssignor):
        name = "sampan-hosts"
        version = 0

        @classmethod
        def metadata(cls, topics: Any) -> ConsumerProtocolMemberMetadata:
            state.leader = False
            return ConsumerProtocolMemberMetadata(cls.version, sorted(topics),
                                                  state.member.to_bytes())

        @classmethod
        def assign(cls, cluster: Any, members: Mapping[str, ConsumerProtocolMemberMetadata]
                   ) -> dict[str, ConsumerProtocolMemberAssignment]:
            state.leader = True
            decoded: dict[str, Member] = {}
            for member_id, metadata in members.items():
                try:
                    decoded[member_id] = Member.from_bytes(metadata.user_data)
                except (ValueError, KeyError, TypeError) as error:
                    log.error("member %s sent unreadable metadata (%r); ignored", member_id,
                              error)
            answers = state.lead(decoded)
            return {m: ConsumerProtocolMemberAssignment(
                cls.version, [], answers.get(m, Answer(error="unreadable metadata")).to_bytes())
                for m in members}

        @classmethod
        def on_assignment(cls, assignment: ConsumerProtocolMemberAssignment) -> None:
            try:
                state.answer = Answer.from_bytes(assignment.user_data)
            except (ValueError, KeyError, TypeError) as error:
                state.answer = Answer(error=f"unreadable assignment ({error!r})")

    return HostAssignor


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, state: _Round, revoked: Callable[[], Awaitable[Member]],
                 assigned: Callable[[Answer], Awaitable[None]]) -> None:
        self.state = state
        self.revoked = revoked
        self.assigned = assigned

    async def on_partitions_revoked(self, revoked: Any) -> None:
        self.state.member = await self.revoked()  # stop everything, then say what we hold

    async def on_partitions_assigned(self, assigned: Any) -> None:
        answer, self.state.answer = self.state.answer, None
        if answer is not None:
            await self.assigned(answer)


class Membership:
    """This host in its job's group; ``poll`` keeps it there, ``leave`` leaves at once."""

    def __init__(self, system: Any, job: str, topic: str, member: Member, *, lead: Lead,
                 revoked: Callable[[], Awaitable[Member]],
                 assigned: Callable[[Answer], Awaitable[None]], session_timeout_ms: int,
                 rebalance_timeout_ms: int) -> None:
        self.system = system
        self.job = job
        self.topic = topic
        self._round = _Round(member, lead)
        self._listener = _Listener(self._round, revoked, assigned)
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self._consumer: AIOKafkaConsumer | None = None

    @property
    def leader(self) -> bool:
        """Whether this host computed the last assignment."""
        return self._round.leader

    async def join(self) -> None:
        """Start the group consumer; the first rebalance runs as ``poll`` is called."""
        options = self.system.options
        session = self.session_timeout_ms
        kwargs = options.client_kwargs(self.system.bootstrap)
        # A JoinGroup is answered only when the round ends (up to a session or rebalance
        # timeout on some brokers): the request must be allowed to wait that long.
        kwargs["request_timeout_ms"] = max(kwargs.get("request_timeout_ms", 0),
                                           max(session, self.rebalance_timeout_ms) + 5000)
        self._consumer = AIOKafkaConsumer(
            **kwargs, group_id=group_id(self.job),
            enable_auto_commit=False, session_timeout_ms=session,
            heartbeat_interval_ms=max(300, session // 4),
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            max_poll_interval_ms=max(self.rebalance_timeout_ms * 3, 60000),
            partition_assignment_strategy=(_assignor(self._round),))
        await self._consumer.start()
        self._consumer.subscribe([self.topic], listener=self._listener)

    async def poll(self, timeout_ms: int = 200) -> None:
        """Stay in the group (and run any rebalance); never reads records."""
        assert self._consumer is not None
        for partition in self._consumer.assignment():
            self._consumer.pause(partition)
        await self._consumer.getmany(timeout_ms=timeout_ms)

    def rejoin(self) -> None:
        """Ask for a rebalance (probing, partition count change, a member to retry).

        aiokafka has no public call for it; its group coordinator's ``request_rejoin`` is
        what a metadata change calls.
        """
        if self._consumer is not None:
            self._consumer._coordinator.request_rejoin()

    async def leave(self) -> None:
        """Leave the group now (LeaveGroup): the others rebalance without waiting."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                await asyncio.wait_for(consumer.stop(), 15)  # sends LeaveGroup
            except Exception as error:
                log.warning("leaving the group of job %r failed (%r): the others notice "
                            "within the session timeout", self.job, error)
            else:
                log.info("left the group of job %r: the other hosts rebalance now", self.job)
