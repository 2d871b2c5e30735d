"""A pipeline stays exact through expansions on Apache Kafka, both guarantees: its input
grows 2 → 4 → 8 while it runs and a worker is SIGKILLed, then its intermediate stream
grows 2 → 4; every record of every stage is checked (`pipejobs.problems`). Exactly-once:
every re-keyed record, sum, window and join once, in order. At least once: nothing lost,
and anything repeated only as a replay of what was emitted before."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from pipejobs import PipelineJob, drained, feed, grown_to

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("guarantee", ["exactly-once", "at-least-once"])
async def test_expansions_on_kafka_keep_every_output_exact(
        jobs: list[PipelineJob], tmp_path: Path, kafka_broker: Any, guarantee: str) -> None:
    tag = f"pk-{guarantee.split('-')[0]}-{os.getpid()}"
    job = PipelineJob(tmp_path / "job", tag, system="kafka", bootstrap=kafka_broker.bootstrap,
                      guarantee=guarantee, prefix=f"{tag}-")
    jobs.append(job)
    events = f"kafka.{job.stream('events')}"
    by_page = f"kafka.{job.intermediate('by-page')}"
    await job.create(job.stream("events"), 2)
    await job.create(job.stream("clicks"), 2)
    await job.send(400)
    job.start()
    await grown_to(job, {events: 2, by_page: 2})
    stop = asyncio.Event()
    feeding = asyncio.create_task(feed(job, stop))
    try:
        await job.expand(job.stream("events"), 4)
        await grown_to(job, {events: 4})
        os.kill((await job.state()).status.worker_pids[1], signal.SIGKILL)
        await job.expand(job.stream("events"), 8)
        await grown_to(job, {events: 8})
        await job.expand(job.intermediate("by-page"), 4)
        await grown_to(job, {events: 8, by_page: 4})
    finally:
        stop.set()
        batches = await feeding
    assert batches >= 3
    await job.send(400)
    await drained(job)
    assert await job.stop() == 0
    assert await job.checked(exactly_once=guarantee == "exactly-once") == []
    state = await job.state()
    assert state.status.restarts >= 1
    assert [e.change for e in state.status.expansions] == [
        f"{events} 2→4", f"{events} 4→8", f"{by_page} 2→4"]
