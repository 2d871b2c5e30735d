"""A pipeline stays exact through expansions on the local log: its input grows 2 → 4 → 8
while it runs and a worker is SIGKILLed, then its intermediate stream grows 2 → 4 — every
record of every stage checked (`pipejobs.problems`): the re-keyed streams hold each input
record once, each page's running sums follow the records the stage read, one per record,
in order; each window closes once with its exact count; each click joins its event once.
A non-multiple change of an input or of an intermediate stream is refused as for a task
job."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from pipejobs import PipelineJob, drained, feed, grown_to

pytestmark = pytest.mark.slow


async def test_expansions_of_an_input_and_of_an_intermediate_stream_keep_every_output_exact(
        jobs: list[PipelineJob], tmp_path: Path) -> None:
    job = PipelineJob(tmp_path / "job", "pipe-local")
    jobs.append(job)
    events = f"local.{job.stream('events')}"
    by_page = f"local.{job.intermediate('by-page')}"
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
        victim = (await job.state()).status.worker_pids[1]
        os.kill(victim, signal.SIGKILL)
        await job.expand(job.stream("events"), 8)
        await grown_to(job, {events: 8})
        await job.expand(job.intermediate("by-page"), 4)
        await grown_to(job, {events: 8, by_page: 4})
    finally:
        stop.set()
        batches = await feeding
    assert batches >= 3  # records flowed while the models changed
    await job.send(400)
    await drained(job)
    assert await job.stop() == 0
    assert await job.checked(exactly_once=True) == []
    state = await job.state()
    assert state.status.restarts >= 1
    assert [e.change for e in state.status.expansions] == [
        f"{events} 2→4", f"{events} 4→8", f"{by_page} 2→4"]


async def refused(job: PipelineJob, change: str) -> str:
    """Until the coordinator's status names ``change`` among the refused ones; its text."""
    seen: list[str] = []

    async def named() -> bool:
        refusal = (await job.state()).status.refusal
        seen[:] = [refusal.error] if refusal is not None and change in refusal.change else []
        return bool(seen)
    await job.wait(named, f"the refusal of {change}")
    return seen[0]


def refusal_text(stream: str, job: PipelineJob) -> str:
    """What the coordinator says of any job's input that went 2 → 3 under 2 tasks, with
    nothing written at 3 partitions yet (tests/coordinator/test_refused_holds.py)."""
    return (
        f"stream {stream}: partition count went from 2 to 3, refused (2 tasks consume it): "
        "partition count 3 is not a multiple of 2: keys would change tasks; expand to a "
        "multiple of 2 (e.g. 4), or re-key the job's state offline to a task count that "
        f"divides 3. {stream} is held: the job reads {stream} only up to where it had 2 "
        "partitions, on every later count (its other inputs go on). Growing it on to a count "
        "2 tasks map releases it while nothing is written to it at 3 partitions; once records "
        f"are, stop the job and run `sampan rekey {job.path} --tasks M` (keeps them; M one of "
        f"1, 3) or `sampan streams discard-held {stream} --job {job.path}`")


async def test_a_non_multiple_change_of_an_input_or_an_intermediate_stream_is_refused(
        jobs: list[PipelineJob], tmp_path: Path) -> None:
    """by-page 2 → 3, then events 2 → 3: neither maps onto the job's 2 tasks, so each is
    held with the words and remedies of a task job's refusal (what a hold then does is the
    coordinator's, tests/coordinator/test_refused_holds.py); everything before is exact."""
    job = PipelineJob(tmp_path / "job", "pipe-refused")
    jobs.append(job)
    events = f"local.{job.stream('events')}"
    by_page = f"local.{job.intermediate('by-page')}"
    await job.create(job.stream("events"), 2)
    await job.create(job.stream("clicks"), 2)
    await job.send(200)
    job.start()
    await grown_to(job, {events: 2, by_page: 2})

    async def summed() -> bool:
        return await job.output_count(job.stream("page-sums")) >= 200
    await job.wait(summed, "the sums of every record")  # then nothing writes by-page
    await job.expand(job.intermediate("by-page"), 3)
    assert await refused(job, f"{by_page} 2→3") == refusal_text(by_page, job)
    await job.expand(job.stream("events"), 3)
    assert await refused(job, f"{events} 2→3") == " ".join(
        refusal_text(s, job) for s in sorted([events, by_page]))
    assert await job.stop() == 0
    assert await job.checked(exactly_once=True, windows=False) == []
