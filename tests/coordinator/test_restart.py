"""A restarted coordinator with unchanged inputs publishes the same plan and restores nothing."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

from jobs.outputs import keys
from jobs.runs import CountJob, placement


async def test_restart_keeps_model_placement_changelogs_and_local_state(
        make_job: Callable[..., CountJob]) -> None:
    job = make_job("restart", {"words": 4})
    await job.create("words", 4)
    await job.produce("words", keys(40), 5)
    job.start()
    first = await job.wait_epoch(1)
    await job.wait_outputs()
    await job.produce("words", keys(40), 5)  # in flight when the coordinator restarts
    assert await job.stop() == 0
    job.start()
    second = await job.wait_epoch(2)
    await job.wait_outputs()
    await job.produce("words", keys(40), 2)
    await job.wait_outputs()
    assert placement(second) == placement(first) == {
        "Partition 0": ([["local", "words", 0]], 0, 0),
        "Partition 1": ([["local", "words", 1]], 1, 1),
        "Partition 2": ([["local", "words", 2]], 2, 0),
        "Partition 3": ([["local", "words", 3]], 3, 1),
    }
    assert second.model is not None and second.model.reason == "coordinator start"
    modes = {w: r.restore_modes for w, r in second.workers.items()}
    assert modes == {0: {"Partition 0/counts": "none", "Partition 2/counts": "none"},
                     1: {"Partition 1/counts": "none", "Partition 3/counts": "none"}}
    assert [second.workers[w].restored for w in (0, 1)] == [0, 0]
    assert await job.stop() == 0
    await job.assert_exact()


async def test_sigkilled_coordinator_restarts_on_the_same_plan_and_stays_exact(
        make_job: Callable[..., CountJob]) -> None:
    """SIGKILL only the coordinator mid-job: its workers exit (parent death), the next run
    keeps every task where it was, restores at most a delta, and the counts are exact."""
    job = make_job("crashed", {"words": 4})
    await job.create("words", 4)
    await job.produce("words", keys(40), 5)
    process = job.start()
    first = await job.wait_epoch(1)
    await job.produce("words", keys(40), 20)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(30)
    job.start()
    second = await job.wait_epoch(2)
    await job.wait_outputs()
    assert placement(second) == placement(first)
    modes = {m for r in second.workers.values() for m in r.restore_modes.values()}
    assert modes <= {"none", "delta"}
    assert await job.stop() == 0
    await job.assert_exact()
