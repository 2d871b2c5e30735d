"""Expansion taken in place: real `sampan run`, real workers, the real local log on disk.

The running workers take each expansion's model where they run (`model_changes =
"in-place"`, the default): no process restarts, and every output is checked — one per
input, per key in order, the store exact.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from collections.abc import Callable

from freeze import freeze
from jobs.outputs import keys
from jobs.runs import CountJob

from framework.systems.local.schema import database_file


async def produce_until(job: CountJob, stop: asyncio.Event, stream: str = "words") -> int:
    """Produce a round of 40 keys every 20 ms until ``stop``: records in flight while the
    job's model changes. Returns the rounds produced."""
    rounds = 0
    while not stop.is_set():
        await job.produce(stream, keys(40), 1)
        rounds += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.02)
    return rounds


async def test_expansions_in_place_restart_no_worker(make_job: Callable[..., CountJob]) -> None:
    """2→4→8 under steady input: the same worker processes throughout, each took both
    models in place, the status says so, and every output and the store are exact."""
    job = make_job("inplace", {"words": 2}, monitor_ms=300)
    await job.create("words", 2)
    await job.produce("words", keys(40), 10)
    job.start()
    first = await job.wait_epoch(1)
    pids = {w: r.pid for w, r in first.workers.items()}
    stop = asyncio.Event()
    producer = asyncio.create_task(produce_until(job, stop))
    try:
        for epoch, count in ((2, 4), (3, 8)):
            await asyncio.sleep(0.5)
            await job.expand("words", count)
            await job.wait_epoch(epoch)
        await asyncio.sleep(0.5)
    finally:
        stop.set()
        rounds = await producer
    assert rounds >= 3  # records were produced while the models changed
    await job.wait_outputs()
    status = job.sampan("status", "{job}").stdout
    assert await job.stop() == 0
    await job.assert_exact()
    state = await job.state()
    assert state.status.restarts == 0
    assert {w: r.pid for w, r in state.workers.items()} == pids
    assert {w: (r.epoch, r.in_place_changes) for w, r in state.workers.items()} == {
        0: (3, 2), 1: (3, 2)}
    assert [(e.change, e.in_place) for e in state.status.expansions] == [
        ("local.words 2→4", True), ("local.words 4→8", True)]
    assert all(e.pause_ms is not None for e in state.status.expansions)
    assert "taken in place by the workers (none restarted)" in status, status
    log = job.coordinator_log()
    assert "stopping workers" not in log
    assert "the workers take it where they run" in log
    worker_log = (job.logs / "worker-1.log").read_text(errors="replace")
    assert "took job model epoch 2 in place (was 1)" in worker_log
    assert "took job model epoch 3 in place (was 2)" in worker_log
    # counted in words: Partition 1 gains partition 3 (2→4), then 5 and 7 (4→8)
    assert re.search(r"epoch 2 in place \(was 1\) in \d+ ms \([^)]*\): task Partition 1 "
                     r"\+1 partition\n", worker_log), worker_log
    assert re.search(r"epoch 3 in place \(was 2\) in \d+ ms \([^)]*\): task Partition 1 "
                     r"\+2 partitions\n", worker_log), worker_log
    assert "task Partition 1 passed its expansion barrier; consuming 1 new partition\n" in (
        worker_log)
    assert "task Partition 1 passed its expansion barrier; consuming 2 new partitions\n" in (
        worker_log)


async def test_a_worker_frozen_through_an_expansion_takes_it_when_it_thaws(
        make_job: Callable[..., CountJob]) -> None:
    """Worker 1 is frozen (SIGSTOP) while the 2→4 model is published and worker 0 takes
    it; thawed, worker 1 finds its epoch fenced — at its fence check or its commit, which
    is then written again at the new epoch — and takes the model in place: no restart,
    nothing lost or repeated."""
    job = make_job("frozen", {"words": 2}, monitor_ms=300)
    await job.create("words", 2)
    await job.produce("words", keys(40), 10)
    job.start()
    first = await job.wait_epoch(1)
    await job.wait_outputs()
    pid = first.workers[1].pid
    await job.produce("words", keys(40), 5)  # work worker 1 holds uncommitted when frozen

    async def some_read() -> bool:
        return await job.output_total() > 400
    await job.wait(some_read, "the new records being processed")
    freeze(pid, database_file(job.folder / "data"))
    try:
        await job.expand("words", 4)
        await job.produce("words", keys(40), 5)

        async def worker_0_took_it() -> bool:
            report = (await job.state()).workers.get(0)
            return report is not None and report.epoch == 2
        await job.wait(worker_0_took_it, "worker 0 on epoch 2")
    finally:
        os.kill(pid, signal.SIGCONT)
    state = await job.wait_epoch(2)
    await job.produce("words", keys(40), 5)
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()
    state = await job.state()
    assert state.status.restarts == 0
    assert state.workers[1].pid == pid and state.workers[1].in_place_changes == 1
    worker_log = (job.logs / "worker-1.log").read_text(errors="replace")
    assert "took job model epoch 2 in place (was 1)" in worker_log
    assert "stopping without committing" not in worker_log


async def test_model_changes_restart_keeps_the_stop_and_start_path(
        make_job: Callable[..., CountJob]) -> None:
    """``model_changes = "restart"``: the expansion stops every worker and starts new ones
    (new pids), and the result is as exact."""
    job = make_job("restarting", {"words": 2}, monitor_ms=300, model_changes="restart")
    await job.create("words", 2)
    await job.produce("words", keys(40), 10)
    job.start()
    first = await job.wait_epoch(1)
    await job.expand("words", 4)
    await job.produce("words", keys(40), 10)
    state = await job.wait_epoch(2)
    assert all(state.workers[w].pid != first.workers[w].pid for w in (0, 1))
    assert [e.in_place for e in state.status.expansions] == [False]
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()
    assert "stopping workers" in job.coordinator_log()
