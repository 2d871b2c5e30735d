"""A pipeline on two hosts over Apache Kafka, exactly-once, stays exact through
expansions: its input grows 2 → 4 → 8 while it runs and a worker of one host is
SIGKILLed, then its intermediate stream grows 2 → 4; every record of every stage is
checked (`pipejobs.problems`)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from hosts.hostjobs import Hosts
from pipejobs import PipelineJob, drained, feed, grown_to

pytestmark = pytest.mark.slow


async def test_expansions_on_two_hosts_keep_every_output_exact(
        jobs: list[PipelineJob], tmp_path: Path, kafka_broker: Any) -> None:
    tag = f"ph-{os.getpid()}"
    job = PipelineJob(tmp_path / "job", tag, system="kafka", bootstrap=kafka_broker.bootstrap,
                      guarantee="exactly-once", prefix=f"{tag}-", workers=1)
    events = f"kafka.{job.stream('events')}"
    by_page = f"kafka.{job.intermediate('by-page')}"
    await job.create(job.stream("events"), 2)
    await job.create(job.stream("clicks"), 2)
    await job.send(400)
    hosts = Hosts(job.path, tmp_path)
    with hosts.logs_kept_on_failure("pipeline-hosts"):
        hosts.start("a")
        hosts.start("b")

        async def both_hosts() -> bool:
            model = (await job.state()).model
            return model is not None and set(model.hosts) == {"a", "b"} and {
                model.host_of(t) for t in model.tasks} == {"a", "b"}
        await job.wait(both_hosts, "a task on each host", timeout=120)
        await grown_to(job, {events: 2, by_page: 2})
        stop = asyncio.Event()
        feeding = asyncio.create_task(feed(job, stop))
        try:
            await job.expand(job.stream("events"), 4)
            await grown_to(job, {events: 4})
            state = await job.state()
            assert state.model is not None
            victim = next(t.worker for t in state.model.tasks.values()
                          if state.model.host_of(t.name) == "b")
            killed = state.workers[victim].pid
            os.kill(killed, signal.SIGKILL)  # host b restarts it
            await job.expand(job.stream("events"), 8)
            await grown_to(job, {events: 8})
            assert (await job.state()).workers[victim].pid != killed
            await job.expand(job.intermediate("by-page"), 4)
            await grown_to(job, {events: 8, by_page: 4})
        finally:
            stop.set()
            batches = await feeding
        assert batches >= 3
        await job.send(400)
        await drained(job)
        assert not hosts.dead()
    assert await job.checked(exactly_once=True) == []
