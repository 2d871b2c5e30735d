"""Live expansion end to end: real `sampan run`, real workers, the real local log on disk."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Callable

from coordjobs import Job, keys, placement

from framework.stores.rocksdb import store_path

PADDING = 30_000  # changelog records of keys the task never sees: a long full restore


def resume_ms(job_state: object, epoch: int) -> int:
    """Detection → every worker resumed on ``epoch`` (from the coordinator stream)."""
    expansion = next(e for e in job_state.status["expansions"]  # type: ignore[attr-defined]
                     if e["epoch"] == epoch)
    resumed = max(r["resumed_ms"] for r in job_state.workers.values())  # type: ignore
    return int(resumed - expansion["detected_ms"])


async def test_per_key_order_holds_across_two_expansions(make_job: Callable[..., Job]) -> None:
    """2→4→8 with records produced into new partitions before detection: every key exact."""
    job = make_job("order", {"words": 2}, monitor_ms=300)
    await job.create("words", 2)
    await job.produce("words", keys(60), 20)
    job.start()
    await job.wait_epoch(1)
    timings = {}
    for epoch, count in ((2, 4), (3, 8)):
        await job.expand("words", count)
        await job.produce("words", keys(60), 10)  # lands in new partitions before detection
        state = await job.wait_epoch(epoch)
        timings[count] = resume_ms(state, epoch)
        await job.produce("words", keys(60), 5)
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()
    state = await job.state()
    assert [e["change"] for e in state.status["expansions"]] == [
        "local.words 2→4", "local.words 4→8"]
    assert placement(state) == {
        "Partition 0": ([["local", "words", p] for p in (0, 2, 4, 6)], 0, 0),
        "Partition 1": ([["local", "words", p] for p in (1, 3, 5, 7)], 1, 1),
    }
    print(f"detection→resume: 2→4 {timings[4]} ms, 4→8 {timings[8]} ms (monitor 300 ms)")


async def test_worker_sigkilled_mid_expansion_is_restarted_and_exact(
        make_job: Callable[..., Job]) -> None:
    """SIGKILL a worker right after it starts on the new epoch: restarted, counts exact."""
    job = make_job("killed", {"words": 2})
    await job.create("words", 2)
    await job.produce("words", keys(50), 20)
    job.start()
    await job.wait_epoch(1)
    await job.expand("words", 4)
    await job.produce("words", keys(50), 20)
    state = await job.wait_epoch(2)
    victim = state.workers[1]["pid"]
    os.kill(victim, signal.SIGKILL)

    async def restarted() -> bool:
        report = (await job.state()).workers.get(1, {})
        return report.get("pid") not in (None, victim) and report.get("epoch") == 2
    await job.wait(restarted, "worker 1 restarted on epoch 2")
    await job.produce("words", keys(50), 5)
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()
    final = await job.state()
    assert final.status["restarts"] == 1
    assert "worker 1 exited with status -9" in job.coordinator_log()


async def test_expansion_while_a_worker_restores_its_store(make_job: Callable[..., Job]) -> None:
    """A task that lost its store directory fully restores a big changelog during an expansion."""
    job = make_job("restoring", {"words": 2}, extra="store_restore_batch = 1\n")
    await job.create("words", 2)
    await job.produce("words", keys(100), 5)
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    assert await job.stop() == 0
    padding = await job.pad_changelog(partition=1, records=PADDING)
    shutil.rmtree(store_path(job.config.data_dir, "counts", "Partition 1"))
    (job.logs / "worker-1.log").unlink()
    job.start()

    async def restoring() -> bool:
        log = job.logs / "worker-1.log"
        return log.exists() and "full restore of" in log.read_text(errors="replace")
    await job.wait(restoring, "worker 1 fully restoring Partition 1")
    await job.expand("words", 4)
    await job.produce("words", keys(100), 5)
    state = await job.wait_epoch(3)
    await job.wait_outputs()
    assert await job.stop() == 0
    assert await job.outputs() == job.truth.expected_outputs()
    assert await job.store() == {**padding, **job.truth.sent}
    text = (job.logs / "worker-1.log").read_text(errors="replace")
    assert "restore store 'counts' of task 'Partition 1': full restore of" in text
    assert state.workers[0]["restore_modes"] == {"Partition 0/counts": "none"}
    assert "local.words 2→4" in job.coordinator_log()
