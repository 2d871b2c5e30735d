"""The coordinator lease on Kafka through KIP-848's consumer group protocol: held in the
broker's first answer whatever ``group.initial.rebalance.delay.ms``, still one holder.

Every test here runs against one broker of its own whose initial rebalance delay is 60 s:
a lease that waited for the classic protocol's first rebalance could not be held in time.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import kafka_broker as brokers
import pytest
from kafka_broker import KafkaBroker
from polling import apoll

from framework.config.sections import SystemConfig
from framework.coordinator.kafka_lease import KafkaCoordinatorLease
from framework.coordinator.lease import CoordinatorRunningError
from framework.systems import open_system
from framework.systems.base import System

REPO = Path(__file__).resolve().parents[2]

DELAY_MS = 60_000
"""The broker's group.initial.rebalance.delay.ms: far beyond any wait below."""

BOUND_S = 30.0
"""How long a lease may take here: half the delay, dozens of times what it needs."""


@pytest.fixture(scope="module")
def _module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """One broker for this module, with the long initial rebalance delay."""
    broker = brokers.start_kafka(tmp_path_factory.mktemp("kafka"),
                                 settings={"group.initial.rebalance.delay.ms": str(DELAY_MS)})
    try:
        yield broker
    finally:
        broker.stop()


def _config(bootstrap: str) -> SystemConfig:
    return SystemConfig(name="kafka", type="kafka", bootstrap=bootstrap)


async def _system(bootstrap: str, job: str) -> System:
    """The metadata system with the job's one-partition coordinator stream."""
    system = open_system(_config(bootstrap))
    await system.start()
    await system.create_stream(f"__sampan-{job}-coordinator", 1, compacted=True, exist_ok=True)
    return system


def _lease(system: System, job: str) -> KafkaCoordinatorLease:
    return KafkaCoordinatorLease(system, job, f"__sampan-{job}-coordinator", 6000)


async def test_the_lease_is_held_without_waiting_for_the_initial_rebalance_delay(
        _module_broker: KafkaBroker) -> None:
    job = f"lease-{uuid.uuid4().hex[:8]}"
    system = await _system(_module_broker.bootstrap, job)
    lease = _lease(system, job)
    try:
        await asyncio.wait_for(lease.acquire(), BOUND_S)
        assert lease.held
        assert lease.protocol == "consumer"  # the broker assigned in its first answer
    finally:
        await lease.release()
        await system.close()


async def test_a_second_coordinator_is_refused_and_the_first_keeps_the_lease(
        _module_broker: KafkaBroker) -> None:
    job = f"lease-{uuid.uuid4().hex[:8]}"
    system = await _system(_module_broker.bootstrap, job)
    first, second = _lease(system, job), _lease(system, job)
    lost = asyncio.Event()
    try:
        await asyncio.wait_for(first.acquire(), BOUND_S)
        keeper = asyncio.create_task(first.keep(lost))
        with pytest.raises(CoordinatorRunningError) as refused:
            await asyncio.wait_for(second.acquire(), BOUND_S)
        assert f"is already running: its coordinator is pid {os.getpid()} on host " in str(
            refused.value)
        assert not second.held
        member = first._member
        assert member is not None
        beat = await member.heartbeat()  # the broker still gives partition 0 to the first
        assert beat.error_code == 0 and member.owned
        assert not lost.is_set() and first.held
        keeper.cancel()
    finally:
        await first.release()
        await second.release()
        await system.close()


async def test_a_released_lease_is_taken_at_once_by_the_next_coordinator(
        _module_broker: KafkaBroker) -> None:
    job = f"lease-{uuid.uuid4().hex[:8]}"
    system = await _system(_module_broker.bootstrap, job)
    first, second = _lease(system, job), _lease(system, job)
    try:
        await asyncio.wait_for(first.acquire(), BOUND_S)
        await first.release()
        await asyncio.wait_for(second.acquire(), BOUND_S)
        assert second.held and second.protocol == "consumer"
    finally:
        await second.release()
        await system.close()


HOLDER = textwrap.dedent("""\
    import asyncio, sys
    from framework.config.sections import SystemConfig
    from framework.coordinator.kafka_lease import KafkaCoordinatorLease
    from framework.systems import open_system

    async def main():
        system = open_system(SystemConfig(name="kafka", type="kafka", bootstrap=sys.argv[1]))
        await system.start()
        lease = KafkaCoordinatorLease(system, sys.argv[2], f"__sampan-{sys.argv[2]}-coordinator",
                                      6000)
        await lease.acquire()
        print("held", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
""")


async def test_a_holder_killed_on_this_host_is_removed_from_the_group_at_once(
        _module_broker: KafkaBroker, caplog: pytest.LogCaptureFixture) -> None:
    """The broker's session timeout (45 s) would hold the lease past the bound: the next
    coordinator sends the dead holder's leave itself, with the member id it announced."""
    job = f"lease-{uuid.uuid4().hex[:8]}"
    system = await _system(_module_broker.bootstrap, job)
    parent = os.getpid()  # the holder waits forever: it must die with this run, even killed
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, _module_broker.bootstrap, job],
                              stdout=subprocess.PIPE, text=True, cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)},
                              preexec_fn=lambda: brokers._die_with(parent))
    lease: KafkaCoordinatorLease | None = None
    try:
        assert holder.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(holder.stdout.readline), 120)
        assert line == "held\n"
        lease = _lease(system, job)  # started after the holder, as the next `sampan run`
        started = time.monotonic()
        while (await lease._current_holder()) is None:  # its announcement is readable
            assert time.monotonic() - started < 60, "the holder never announced itself"
            await apoll(started)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(30)
        with caplog.at_level(logging.WARNING, logger="framework.coordinator.kafka_lease"):
            await asyncio.wait_for(lease.acquire(), BOUND_S)
        assert lease.held
        assert f"held by coordinator pid {holder.pid}, which is no longer running; removing " \
            "it from the group" in caplog.text
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if lease is not None:
            await lease.release()
        await system.close()
