"""Live expansion end to end: real `sampan run`, real workers, the real local log on disk."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from freeze import freeze
from jobs.outputs import keys
from jobs.runs import CountJob, placement

from framework.errors import FencedError
from framework.metadata import CoordinatorState
from framework.stores.restore import FAULT_BATCH_DELAY_ENV
from framework.stores.rocksdb import store_path
from framework.systems.local.schema import database_file
from framework.worker.runner import Worker

PADDING = 4_000  # changelog records of keys the task never sees: a long full restore
SLOW_RESTORE = {FAULT_BATCH_DELAY_ENV: "5"}  # ≥ 5 ms per record: ≥ 20 s on any machine


def resume_ms(job_state: CoordinatorState, epoch: int) -> int:
    """Detection → every worker resumed on ``epoch`` (from the coordinator stream)."""
    expansion = next(e for e in job_state.status.expansions if e.epoch == epoch)
    resumed = max(r.resumed_ms or 0 for r in job_state.workers.values())
    return resumed - expansion.detected_ms


async def test_per_key_order_holds_across_two_expansions(make_job: Callable[..., CountJob]) -> None:
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
    assert [e.change for e in state.status.expansions] == [
        "local.words 2→4", "local.words 4→8"]
    assert placement(state) == {
        "Partition 0": ([["local", "words", p] for p in (0, 2, 4, 6)], 0, 0),
        "Partition 1": ([["local", "words", p] for p in (1, 3, 5, 7)], 1, 1),
    }
    print(f"detection→resume: 2→4 {timings[4]} ms, 4→8 {timings[8]} ms (monitor 300 ms)")


async def test_worker_sigkilled_mid_expansion_is_restarted_and_exact(
        make_job: Callable[..., CountJob]) -> None:
    """With model_changes = "restart": SIGKILL worker 1's first epoch-2 process as soon as
    it exists: restarted, exact."""
    job = make_job("killed", {"words": 2}, model_changes="restart")
    await job.create("words", 2)
    await job.produce("words", keys(50), 20)
    job.start()
    first = await job.wait_epoch(1)
    old = first.workers[1].pid
    await job.expand("words", 4)
    await job.produce("words", keys(50), 20)
    victim: list[int] = []

    async def switched() -> bool:
        pid = (await job.state()).status.worker_pids.get(1)
        if pid is not None and pid != old:
            victim.append(pid)
        return bool(victim)
    await job.wait(switched, "worker 1 started on epoch 2")
    os.kill(victim[0], signal.SIGKILL)

    async def restarted() -> bool:
        report = (await job.state()).workers.get(1)
        return report is not None and report.pid not in (old, victim[0]) and report.epoch == 2
    await job.wait(restarted, "worker 1 restarted on epoch 2")
    await job.produce("words", keys(50), 5)
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()
    final = await job.state()
    assert final.status.restarts == 1
    assert "worker 1 killed by SIGKILL (log: " in job.coordinator_log()


def pending_signals(pid: int) -> int:
    """The signals waiting for a (stopped) process, as a bit mask (Linux /proc)."""
    fields = dict(line.split(":", 1) for line in
                  Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["SigPnd"], 16) | int(fields["ShdPnd"], 16)


async def test_expansion_while_a_worker_restores_its_store(
        make_job: Callable[..., CountJob]) -> None:
    """A worker stopped mid-restore by an expansion stops at once; the next epoch restores
    only the rest (a delta), and every output and the store are exact.

    Deterministic on any machine: the restoring worker is frozen (SIGSTOP) once a quarter of
    its restore is applied, the expansion is made and detected, and the worker is thawed only
    when the coordinator's SIGTERM is pending for it.
    """
    job = make_job("restoring", {"words": 2}, stop_timeout_ms=60_000,
                   extra="store_restore_batch = 1\n", model_changes="restart")
    await job.create("words", 2)
    await job.produce("words", keys(100), 5)
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    assert await job.stop() == 0
    padding = await job.pad_changelog(partition=1, records=PADDING)
    changelog = job.config.changelog_stream("counts").partition(".")[2]
    restore_end = (await job.call(lambda s: s.offsets(changelog)))[1].end
    shutil.rmtree(store_path(job.config.state_dir, "counts", "Partition 1"))
    log = job.logs / "worker-1.log"
    log.unlink()
    job.env = SLOW_RESTORE
    job.start()

    async def quarter_restored() -> bool:
        return log.exists() and "(25%)" in log.read_text(errors="replace")
    await job.wait(quarter_restored, "worker 1 a quarter into restoring Partition 1")
    pid = (await job.state()).status.worker_pids[1]
    freeze(pid, database_file(job.folder / "data"))
    assert "restore applied" not in log.read_text(errors="replace"), (
        "the restore finished before the test could freeze it")
    await job.expand("words", 4)

    async def term_pending() -> bool:
        return bool(pending_signals(pid) & (1 << (signal.SIGTERM - 1)))
    await job.wait(term_pending, "the coordinator's SIGTERM to the frozen worker 1")
    os.kill(pid, signal.SIGCONT)
    await job.produce("words", keys(100), 5)
    state = await job.wait_epoch(3)
    await job.wait_outputs()
    assert await job.stop() == 0
    assert await job.outputs() == job.truth.expected_outputs()
    assert await job.store() == {**padding, **job.truth.sent}

    text = log.read_text(errors="replace")
    stopped = re.search(
        r"worker 1 stopped while restoring: restore store 'counts' of task 'Partition 1': "
        rf"full restore of \[0, {restore_end}\) stopped at offset (\d+) \((\S+) records "
        r"applied\); the next start resumes with a delta restore", text)
    assert stopped is not None, text[-3000:]
    position = int(stopped[1])
    assert restore_end // 4 <= position < restore_end
    assert int(stopped[2].replace(",", "")) == position
    assert f"delta restore of [{position}, {restore_end}) because local state is at offset " \
        f"{position}" in text
    assert state.workers[1].restore_modes == {"Partition 1/counts": "delta"}
    assert state.workers[1].restored == restore_end - position
    assert state.workers[0].restore_modes == {"Partition 0/counts": "none"}
    assert "did not stop within" not in job.coordinator_log()
    assert "local.words 2→4" in job.coordinator_log()


async def test_expansion_while_stopped_drains_old_partitions_first(
        make_job: Callable[..., CountJob]) -> None:
    """Backlog in 2 partitions, expand to 4, more records, then start: barrier keeps order."""
    job = make_job("offline", {"words": 2})
    await job.create("words", 2)
    await job.produce("words", keys(30), 2)
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.produce("words", keys(30), 30)  # backlog in partitions 0 and 1
    await job.expand("words", 4)
    await job.produce("words", keys(30), 30)  # moved keys continue in partitions 2 and 3
    ends = await job.call(lambda s: s.offsets("words"))
    job.start()
    state = await job.wait_epoch(2)
    await job.wait_outputs()
    await job.assert_exact()
    assert state.model is not None
    assert state.model.reason == "coordinator start, expansion local.words 2→4"
    stages = {t.name: [(dict(s.barrier), sorted(s.held)) for s in t.stages]
              for t in state.model.ordered_tasks()}
    assert {name: [({ssp.partition: o for ssp, o in b.items()}, [h.partition for h in held])
                   for b, held in st] for name, st in stages.items()} == {
        "Partition 0": [({0: ends[0].end}, [2])], "Partition 1": [({1: ends[1].end}, [3])]}
    status = job.sampan("status", "{job}")
    assert "held behind" not in status.stdout
    assert status.stdout.count("expansion barrier passed") == 2
    assert "expansion local.words 2→4 → epoch 2" in status.stdout
    assert await job.stop() == 0
    await job.assert_exact()


async def test_a_worker_of_the_old_epoch_is_fenced_after_an_expansion(
        make_job: Callable[..., CountJob]) -> None:
    """A straggler running epoch 1's model after the 2→4 switch cannot commit anything."""
    job = make_job("fenced", {"words": 2})
    await job.create("words", 2)
    await job.produce("words", keys(20), 2)
    job.start()
    old = (await job.wait_epoch(1)).model
    await job.expand("words", 4)
    await job.wait_epoch(2)
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.produce("words", keys(20), 1)  # work the straggler would commit
    before = await job.output_total()
    straggler = Worker(job.config, 0, model=old)
    with pytest.raises(FencedError, match="commit of epoch 1 refused, the job is fenced at "
                                          "epoch 2"):
        await asyncio.wait_for(straggler.run(), 30)
    assert await job.output_total() == before
