"""A worker that a newer model (an incremental rebalance's first model) asks to let a task
go keeps its other tasks processing, lets the next commit carry the task's last writes,
and only then closes its stores and reports the new epoch — the report the leader waits
for before another host may run the task. Real worker on the local log and on Apache
Kafka, every output checked."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import replace
from pathlib import Path

import pytest
from jobs import harness as h
from jobs import outputs as out

from framework.config import JobConfig
from framework.coordinator.builder import build_job_model
from framework.errors import StoreLockedError
from framework.metadata import WorkerReport, publish_model, publish_worker_report
from framework.metadata.jobmodel import PARKED, JobModel
from framework.stores.rocksdb import RocksDBEngine
from framework.systems.base import Checkpoint, System
from framework.worker import reports
from framework.worker.runner import Worker

pytestmark = pytest.mark.slow

LET_GO = "Partition 1"


async def test_a_task_let_go_is_committed_closed_and_then_reported(
        tmp_path: Path, where: tuple[str, str | None], monkeypatch: pytest.MonkeyPatch) -> None:
    config, meta, work = await h.stamped_job(tmp_path / "job", "let-go", *where)
    try:
        first = await h.prepare(config, meta)
        counts = dict(first.partition_counts)
        one_host = replace(build_job_model(config, counts, first), epoch=first.epoch + 1,
                           hosts={"h": (0,)})
        one_host = await publish_model(meta, config, one_host)
        at_report: list[tuple[WorkerReport, Checkpoint | None, bool]] = []
        epoch_parked = one_host.epoch + 1

        async def spy(target: System, job: JobConfig, worker_id: int,
                      report: WorkerReport) -> None:
            if report.epoch == epoch_parked and not at_report:  # the first report of it
                checkpoint = (await meta.read_checkpoints(config.name)).get(LET_GO)
                try:
                    RocksDBEngine.open(config.state_dir, "totals", LET_GO).close()
                    lock_free = True
                except StoreLockedError:
                    lock_free = False
                at_report.append((report, checkpoint, lock_free))
            await publish_worker_report(target, job, worker_id, report)

        monkeypatch.setattr(reports, "publish_worker_report", spy)
        worker = Worker(config, 0, in_place=True)
        running = asyncio.create_task(worker.run())
        feed = h.SteadyFeed(meta, work)
        try:
            await h.wait_until(h.processed(worker, 300), 60, "the worker's first records")
            parked: JobModel = replace(
                one_host, epoch=one_host.epoch + 1, in_place_since=one_host.epoch,
                tasks={**one_host.tasks,
                       LET_GO: replace(one_host.tasks[LET_GO], worker=PARKED)},
                parked={LET_GO: "h"})
            parked = await publish_model(meta, config, parked, previous=one_host,
                                         in_place=True)
            assert (parked.epoch, parked.in_place_since) == (epoch_parked, one_host.epoch)

            async def reported() -> bool:
                return bool(at_report)

            await h.wait_until(reported, 60, "the worker's report of the parked model")
            # When the report was written, the task's last commit had landed and its
            # stores were closed (the spy looked before letting it through).
            report, checkpoint, lock_free = at_report[0]
            assert LET_GO not in report.tasks and report.resumed_ms is not None
            assert checkpoint is not None and checkpoint.epoch == parked.epoch
            assert lock_free
            reported_at = time.time()
            await asyncio.sleep(2)  # the other tasks go on; the task let go stays let go
        finally:
            worker.stop.set()
            with contextlib.suppress(Exception):
                await feed.stop()
        result = await running
        assert result.epoch == parked.epoch and worker.in_place_changes == 1
        assert (await meta.read_checkpoints(config.name))[LET_GO] == checkpoint

        found = await out.outputs(meta, config)
        outputs = [o for rows in found.values() for o in rows]
        assert max(o["t"] for o in outputs if o["p"] != 1) > reported_at + 1
        # Every output in order with its running sum, replays only; the task let go has
        # an output exactly for each record below its checkpoint.
        let_go = next(s for s in checkpoint.inputs)
        below = {(k, o["n"]) for k, rows in found.items() for o in rows if o["p"] == 1}
        assert len(below) == checkpoint.inputs[let_go]
        problems = out.replay_problems(found, work)
        missing = [p for p in problems if "records have an output" not in p]
        assert missing == []  # records of partition 1 past its checkpoint have none
    finally:
        await meta.close()

