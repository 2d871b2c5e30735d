"""Prepared workers: `sampan run` starts a worker process ahead (imports, connections) and
tells it to go once the model it is to run is published; one not needed ends unused."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from jobs.outputs import keys
from jobs.runs import CountJob

from framework.coordinator.supervisor import Supervisor


async def _has_open(pid: int, name: str) -> bool:
    """Whether process ``pid`` holds a file named ``name`` open (Linux /proc)."""
    folder = Path(f"/proc/{pid}/fd")
    try:
        return any(os.readlink(fd).endswith(name) for fd in folder.iterdir())
    except OSError:
        return False


def supervisor(job: CountJob) -> Supervisor:
    return Supervisor(job.path, log_dir=job.logs, tee=False, stop_timeout_s=20)


async def test_prepared_workers_run_the_latest_model_once_told(
        make_job: Callable[..., CountJob]) -> None:
    """The processes started ahead are the ones that run (same pids), exactly."""
    job = make_job("ahead", {"words": 2})
    await job.create("words", 2)
    await job.produce("words", keys(30), 2)
    job.start()
    await job.wait_epoch(1)
    assert await job.stop() == 0
    job.process = None
    await job.produce("words", keys(30), 2)
    workers = supervisor(job)
    await workers.prepare(2)
    ahead = {w: p.process.pid for w, p in workers.prepared.items()}
    try:
        await workers.start(2)
        assert workers.pids() == ahead and workers.prepared == {}
        await job.wait_outputs()
        state = await job.state()
        assert {w: r.pid for w, r in state.workers.items()} == ahead
    finally:
        await workers.stop()
    await job.assert_exact()


async def test_a_prepared_worker_not_needed_ends_without_writing(
        make_job: Callable[..., CountJob]) -> None:
    """Discarded before or after it got ready: it exits, reports nothing, commits nothing."""
    job = make_job("unused", {"words": 2})
    await job.create("words", 2)
    await job.produce("words", keys(30), 2)
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    assert await job.stop() == 0
    job.process = None
    before = await job.state()
    checkpoints = await job.checkpoints()
    await job.produce("words", keys(30), 1)
    workers = supervisor(job)
    await workers.prepare(2)
    early = workers.prepared[0].process  # told to end at once: still starting up
    await workers.discard_prepared()
    assert early.returncode is not None and workers.prepared == {}
    await workers.prepare(1)
    ready = workers.prepared[0].process
    await job.wait(lambda: _has_open(ready.pid, "log.sqlite3"), "the worker's log connection")
    await workers.discard_prepared()
    assert ready.returncode == 0  # its handlers were installed: it ended by itself
    log = job.logs / "worker-0.log"
    after = await job.state()
    assert {w: r.pid for w, r in after.workers.items()} == {
        w: r.pid for w, r in before.workers.items()}
    assert await job.checkpoints() == checkpoints
    assert "Traceback" not in log.read_text(errors="replace")
