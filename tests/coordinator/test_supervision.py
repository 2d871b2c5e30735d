"""Supervision end to end: a stuck task is reported and its worker restarted; crashes are
counted in a sliding window."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
from collections.abc import Callable

from jobs.outputs import keys
from jobs.runs import CountJob

from framework.config import load_config


async def test_a_task_stuck_in_process_is_reported_and_its_worker_restarted(
        make_job: Callable[..., CountJob]) -> None:
    """`process` blocks forever on key k007: after job.task_timeout_ms the worker names the
    task, SSP and offset and exits; `sampan run` restarts it (stuck again: the record is
    still there), reports it in status, then gives up naming the stuck call."""
    job = make_job("stuck", {"words": 2}, task="StuckTask", workers=1, max_restarts=1,
                   extra="task_timeout_ms = 1000\n")
    await job.create("words", 2)
    await job.produce("words", keys(10), 1)
    process = job.start()

    async def exited() -> bool:
        return process.poll() is not None
    job.process = None
    await job.wait(exited, "sampan run to give up on the stuck task", timeout=120)
    job.process = process
    assert process.returncode == 2
    last = job.coordinator_log().splitlines()[-1]
    assert re.fullmatch(
        r"sampan run: error: worker 0 exited 2 times within 10 min \(last status 4\): task "
        r"'Partition (\d)' stuck in process\(\) on local\.words\[\1\] offset \d+ for \d+\.\d s "
        r"\(job\.task_timeout_ms = 1000\); stopping this worker so that it is restarted from "
        r"its last commit; the worker's log is \S+worker-0\.log; fix the cause and run again",
        last), last
    assert "worker 0 exited with status 4: task 'Partition" in job.coordinator_log()
    document = json.loads(job.sampan("status", "{job}", "--json").stdout)
    assert document["stuck"]["worker"] == 0
    assert "stuck in process() on local.words[" in document["stuck"]["detail"]
    text = job.sampan("status", "{job}").stdout
    assert "STUCK at " in text and "the worker was restarted" in text


async def test_crashes_spread_over_time_never_stop_the_job(
        make_job: Callable[..., CountJob]) -> None:
    """max_worker_restarts = 1 within a 1 s window: three SIGKILLs, each more than a window
    apart, are each restarted; the job stays exact."""
    job = make_job("spread", {"words": 2}, workers=1, max_restarts=1)
    job.path.write_text(job.path.read_text().replace(
        "max_worker_restarts = 1", "max_worker_restarts = 1\ncrash_window_ms = 1000"))
    job.config = load_config(job.path)
    await job.create("words", 2)
    job.start()
    await job.wait_epoch(1)
    for round_number in range(3):
        await job.produce("words", keys(20), 2)
        await job.wait_outputs()
        pid = (await job.state()).status.worker_pids[0]
        os.kill(pid, signal.SIGKILL)

        async def restarted(old: int = pid) -> bool:
            report = (await job.state()).workers.get(0)
            return report is not None and report.pid != old and report.resumed_ms is not None
        await job.wait(restarted, f"worker 0 restarted after kill {round_number + 1}")
        await job.produce("words", keys(20), 1)
        await job.wait_outputs()
        await asyncio.sleep(1.2)  # the next kill falls outside this one's window
    assert await job.stop() == 0
    await job.assert_exact()
    assert job.coordinator_log().count("restarting worker 0") == 3
