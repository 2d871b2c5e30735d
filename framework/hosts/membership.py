"""A host's membership of its job's group, through Kafka's own group protocol (aiokafka).

Every host of job ``J`` joins the consumer group ``__sampan-J-hosts`` subscribed to the
job's coordinator stream (no partition is ever handed out: the group is for membership).
On every rebalance each host says what it holds (``on_revoked``: an eager host stops its
workers first, an incremental one only its replicas) and joins with its `Member`
metadata; the leader's assignor answers each member with the round's id, and after the
round (`Membership.settle`, between polls: aiokafka sends no heartbeat during its
``on_assigned`` callback) the leader builds and publishes the model carrying that id while
the others wait for it (`framework.hosts.host`, `framework.hosts.handover`). A host that dies stops
heartbeating and is removed after ``coordinator.session_timeout_ms``; one that stops
cleanly leaves the group at once — unless it stops inside a round it leads (or led last),
see `Membership.leave`.

aiokafka has no public call to ask for a rebalance or to leave without LeaveGroup: both go
through its group coordinator (``consumer._coordinator``), reached only through
`group_coordinator`, which raises `AiokafkaUnsupportedError` when an aiokafka release lacks
what is used (pyproject.toml pins the releases known to work).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiokafka
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from framework.hosts.errors import AiokafkaUnsupportedError
from framework.hosts.member import Answer, Member
from framework.systems.kafka.aiokafka_private import (
    COORDINATOR_HOOKS,
    group_coordinator_of,
    missing_coordinator_hooks,
    replace_leave_group,
)
from framework.systems.kafka.denials import DENIALS

__all__ = ["COORDINATOR_HOOKS", "Membership", "group_coordinator", "group_id"]

log = logging.getLogger(__name__)

Lead = Callable[[Mapping[str, Member]], Mapping[str, Answer]]
"""The leader's step: member id → `Member` in, member id → `Answer` out (synchronous)."""


def group_id(job: str) -> str:
    """The Kafka consumer group of job ``job``'s hosts."""
    return f"__sampan-{job}-hosts"


def group_coordinator(consumer: Any) -> Any:
    """aiokafka's group coordinator of ``consumer``, or `AiokafkaUnsupportedError` naming
    the installed aiokafka release when it lacks the hooks the hosts use."""
    coordinator = group_coordinator_of(consumer)
    missing = missing_coordinator_hooks(coordinator)
    if coordinator is None or missing:
        what = "consumer._coordinator" if coordinator is None else ", ".join(missing)
        raise AiokafkaUnsupportedError(
            f"aiokafka {aiokafka.__version__} has no group coordinator {what}, "
            "which sampan hosts use to ask for a rebalance and to leave a round they lead; "
            "install the aiokafka release pyproject.toml pins (pip install "
            "'aiokafka>=0.14,<0.15')")
    return coordinator


class _Round:
    """What one consumer's assignor knows: this host's metadata and the last answer."""

    def __init__(self, member: Member, lead: Lead) -> None:
        self.member = member
        self.lead = lead
        self.answer: Answer | None = None
        self.leader = False
        """This member computed the assignment of the current (or last) round."""
        self.in_round = False
        """A rebalance started (revoke) and no assignment arrived yet."""
        self.led_last = False
        """This member led the last completed round (tansu keeps it the next round's leader)."""

    @property
    def leads_open_round(self) -> bool:
        """Inside a round this member leads or may lead: leaving now (LeaveGroup) would
        strand the others on tansu (docs/hosts.md, "tansu")."""
        return self.in_round and (self.leader or self.led_last)


def _assignor(state: _Round) -> type[AbstractPartitionAssignor]:
    """One assignor class per consumer (aiokafka calls strategies as classes)."""

    class HostAssignor(AbstractPartitionAssignor):  # type: ignore[misc]
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
                 assigned: Callable[[Answer], Awaitable[None]],
                 member_id: Callable[[], str], lost: Callable[[], None]) -> None:
        self.state = state
        self.revoked = revoked
        self.assigned = assigned
        self.member_id = member_id
        """This consumer's member id now (aiokafka empties it when the group forgot it)."""
        self.lost = lost
        self.joined_as = ""
        """The member id of the last round this member took part in."""
        self.closed = False
        """Set when the member leaves: an answer arriving while it stops is not run."""
        self.pending: Answer | None = None
        """The last round's answer, kept by the callback until `settle` runs it."""

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self.settle()  # the last round's answer runs before the next round starts
        if self.joined_as and self.member_id() != self.joined_as:
            self.lost()
        self.state.in_round = True
        self.state.member = await self.revoked()  # say what we hold (eager: stop first)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        # aiokafka sends no heartbeat until this callback returns: the answer is only kept
        # here and run by `settle`, else a model built or run in it for longer than the
        # session timeout (a loaded machine) would get this member dropped from the group.
        self.state.in_round = False
        self.state.led_last = self.state.leader
        self.joined_as = self.member_id()
        self.pending, self.state.answer = self.state.answer, None

    async def settle(self) -> None:
        """Run the answer of the last round, if not yet run (outside aiokafka's callback)."""
        answer, self.pending = self.pending, None
        if answer is not None and not self.closed:
            await self.assigned(answer)


class Membership:
    """This host in its job's group; ``poll`` keeps it there, ``leave`` leaves at once."""

    def __init__(self, system: Any, job: str, topic: str, member: Member, *, lead: Lead,
                 revoked: Callable[[], Awaitable[Member]],
                 assigned: Callable[[Answer], Awaitable[None]], session_timeout_ms: int,
                 rebalance_timeout_ms: int, heartbeat_interval_ms: int | None = None) -> None:
        self.system = system
        self.job = job
        self.topic = topic
        self._lead = lead
        self._revoked = revoked
        self._assigned = assigned
        self._round = _Round(member, lead)
        self._listener = self._new_listener()
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms or max(300, session_timeout_ms // 4)
        """How often it heartbeats (a quarter of the session timeout unless given): how
        soon it hears of a rebalance."""
        self._consumer: AIOKafkaConsumer | None = None
        self.request_timeout_ms = 0

    def _new_listener(self) -> _Listener:
        return _Listener(self._round, self._revoked, self._assigned, self._member_id,
                         self._lost)

    def _member_id(self) -> str:
        return str(group_coordinator(self._consumer).member_id) if self._consumer else ""

    def _lost(self) -> None:
        log.warning("job %r: this host's group member was dropped (Kafka refused its "
                    "heartbeat: no heartbeat arrived within its session timeout of %d ms — a "
                    "paused or starved process — or a round ended without it); it joins "
                    "again as a new member, and workers whose tasks moved meanwhile are "
                    "fenced and restart", self.job, self.session_timeout_ms)

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
        kwargs["request_timeout_ms"] = self.request_timeout_ms = max(
            kwargs.get("request_timeout_ms", 0), max(session, self.rebalance_timeout_ms) + 5000)
        self._consumer = AIOKafkaConsumer(
            **kwargs, group_id=self.system.options.named(group_id(self.job)),
            enable_auto_commit=False, session_timeout_ms=session,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            max_poll_interval_ms=max(self.rebalance_timeout_ms * 3, 60000),
            partition_assignment_strategy=(_assignor(self._round),))
        await self.system.admin.connect(self._consumer.start())
        self._consumer.subscribe([self.system.admin.topic(self.topic)], listener=self._listener)

    async def poll(self, timeout_ms: int = 200) -> None:
        """Stay in the group (and run any rebalance); never reads records."""
        assert self._consumer is not None
        for partition in self._consumer.assignment():
            self._consumer.pause(partition)
        try:
            await self._consumer.getmany(timeout_ms=timeout_ms)
        except DENIALS as error:
            raise self.system.admin.denial(
                error, "READ", self.system.options.named(group_id(self.job)),
                "joining the group of the job's hosts") from error

    async def settle(self) -> None:
        """Run the last round's answer (the ``assigned`` callback) if it has not run: called
        between polls, it runs while aiokafka heartbeats (not inside its callback)."""
        await self._listener.settle()

    def rejoin(self) -> None:
        """Ask for a rebalance (probing, partition count change, a member to retry).

        aiokafka has no public call for it; its group coordinator's ``request_rejoin`` is
        what a metadata change calls.
        """
        if self._consumer is not None:
            group_coordinator(self._consumer).request_rejoin()

    @property
    def in_round(self) -> bool:
        """Inside a rebalance: revoked, no assignment received yet."""
        return self._round.in_round

    @property
    def waiting(self) -> bool:
        """Inside a rebalance whose answer is someone else's: revoked, not leading it (its
        leader answers it), no assignment received yet."""
        return self._round.in_round and not self._round.leader

    async def leave(self, timeout_s: float = 15) -> None:
        """Leave the group now (LeaveGroup): the others rebalance without waiting.

        Except from a round this member leads (or led last, so tansu keeps it as leader)
        that has not ended: there it sends no LeaveGroup and the broker removes the member
        after the session timeout. tansu keeps a leader that leaves a forming round as the
        round's leader, so the others would wait for its assignment forever; a leader that
        misses its heartbeats is dropped, and a new one chosen.
        """
        consumer, self._consumer = self._consumer, None
        if consumer is None:
            return
        self._listener.closed = True
        coordinator = group_coordinator(consumer)
        said: list[bool] = []

        async def leave_unless_leading() -> None:  # decided when aiokafka would leave
            if self._round.leads_open_round:
                said.append(False)
                log.warning("leaving job %r's group during a rebalance this host leads: no "
                            "LeaveGroup (it would strand the others on tansu); the broker "
                            "drops this member after coordinator.session_timeout_ms (%d ms)",
                            self.job, self.session_timeout_ms)
                coordinator.reset_generation()
                return
            said.append(True)
            await send_leave()

        send_leave = replace_leave_group(coordinator, leave_unless_leading)
        try:
            await asyncio.wait_for(consumer.stop(), timeout_s)
        except Exception as error:
            log.warning("leaving the group of job %r failed (%r): the others notice "
                        "within the session timeout", self.job, error)
        else:
            if said == [True]:
                log.info("left the group of job %r: the other hosts rebalance now", self.job)

    async def rejoin_as_new(self, member: Member) -> None:
        """Give up this member (leave as `leave` does) and join again as a new member with
        ``member``'s metadata. The old consumer is given the time its request in flight
        may take (a JoinGroup or SyncGroup the broker holds) to stop cleanly."""
        await self.leave(self.request_timeout_ms / 1000 + 5)
        self._round = _Round(member, self._lead)
        self._listener = self._new_listener()
        await self.join()
