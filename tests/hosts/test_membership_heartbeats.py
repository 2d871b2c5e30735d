"""A host's group member stays in its group while the round's answer runs for longer than
its session timeout (a leader building a model, workers starting on a loaded machine):
aiokafka sends no heartbeat during its on-assigned callback, so `Membership` only keeps the
answer there and runs it in `Membership.settle`, between polls. Before, such a host was
dropped by the broker, rejoined as a new member and had its workers fenced and restarted
(seen in tests/hosts/test_incremental.py under a loaded CI machine). A member that is
dropped all the same (a paused process) says so in one warning and joins again."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pytest

from framework.hosts.member import Answer, Member
from framework.hosts.membership import Membership, group_coordinator
from framework.systems.kafka.system import KafkaSystem

SESSION_MS = 6000  # the broker's smallest allowed session timeout (its default minimum)


def _lead(members: Mapping[str, Member]) -> dict[str, Answer]:
    return {member_id: Answer(round_id="round") for member_id in members}


def _member() -> Member:
    return Member("a", 1, os.getpid(), "machine", 0, {}, 0)


async def _joined(bootstrap: str, job: str, revoked: Callable[[], Awaitable[Member]],
                  assigned: Callable[[Answer], Awaitable[None]]) -> Membership:
    """A member of job ``job``'s hosts group on a new coordinator topic, started."""
    system = KafkaSystem("kafka", bootstrap)
    await system.start()
    topic = f"{job}-coordinator"
    await system.create_stream(topic, 1)
    membership = Membership(system, job, topic, _member(), lead=_lead, revoked=revoked,
                            assigned=assigned, session_timeout_ms=SESSION_MS,
                            rebalance_timeout_ms=10000)
    await membership.join()
    return membership


async def _stay(membership: Membership, done: Callable[[], bool], seconds: float) -> None:
    """Poll and settle as a host's loop does, until ``done`` or ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        await membership.poll()
        await membership.settle()


async def _left(membership: Membership) -> None:
    await membership.leave()
    await membership.system.close()


async def _slow_answer_keeps_its_member(bootstrap: str, job: str) -> None:
    revoked: list[float] = []
    ran: list[float] = []

    async def on_revoked() -> Member:
        revoked.append(time.monotonic())
        return _member()

    async def on_assigned(answer: Answer) -> None:
        assert answer.round_id == "round"
        ran.append(time.monotonic())
        await asyncio.sleep(SESSION_MS / 1000 * 1.5)  # longer than the session timeout

    membership = await _joined(bootstrap, job, on_revoked, on_assigned)
    try:
        await _stay(membership, lambda: bool(ran), 60)
        assert ran, "no round was answered within 60 s"
        assert membership.leader
        coordinator: Any = group_coordinator(membership._consumer)
        member_id, generation = coordinator.member_id, coordinator.generation
        # the answer ran for 1.5 session timeouts; then stay another session timeout
        await _stay(membership, lambda: False, SESSION_MS / 1000)
        assert len(ran) == 1 and len(revoked) == 1, (
            f"the member was dropped and rejoined: {len(revoked)} rounds, {len(ran)} answers")
        assert (coordinator.member_id, coordinator.generation) == (member_id, generation)
        assert await membership.system.admin.group_members(
            membership.system.options.named(f"__sampan-{job}-hosts")) == 1
    finally:
        await _left(membership)


def test_an_answer_running_longer_than_the_session_timeout_keeps_the_member(
        kafka_broker: Any) -> None:
    asyncio.run(_slow_answer_keeps_its_member(kafka_broker.bootstrap, f"hb-{os.getpid()}"))


async def _paused_member_says_it_was_dropped(bootstrap: str, job: str) -> None:
    rounds: list[str] = []

    async def on_revoked() -> Member:
        return _member()

    async def on_assigned(answer: Answer) -> None:
        rounds.append(str(group_coordinator(membership._consumer).member_id))

    membership = await _joined(bootstrap, job, on_revoked, on_assigned)
    try:
        await _stay(membership, lambda: bool(rounds), 60)
        assert rounds, "no round was answered within 60 s"
        time.sleep(SESSION_MS / 1000 * 1.5)  # the whole process paused: no heartbeat
        await _stay(membership, lambda: len(rounds) >= 2, 60)
        assert len(rounds) == 2 and rounds[0] != rounds[1], rounds
    finally:
        await _left(membership)


def test_a_member_dropped_for_a_pause_says_so_and_joins_as_a_new_member(
        kafka_broker: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="framework.hosts.membership")
    job = f"hb-paused-{os.getpid()}"
    asyncio.run(_paused_member_says_it_was_dropped(kafka_broker.bootstrap, job))
    said = [r.getMessage() for r in caplog.records if r.name == "framework.hosts.membership"]
    assert said == [
        f"job {job!r}: this host's group member was dropped (Kafka refused its heartbeat: "
        f"no heartbeat arrived within its session timeout of {SESSION_MS} ms — a paused or "
        "starved process — or a round ended without it); it joins again as a new member, "
        "and workers whose tasks moved meanwhile are fenced and restart"]
