"""A worker the job model gives no task still obeys SIGTERM; SIGUSR1 logs its tasks."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from jobs import harness as h
from jobs import jobfiles as jf

from framework.metadata import read_state


async def test_a_worker_without_tasks_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    """4 tasks on 5 workers: worker 4 idles without spinning and exits 0 on SIGTERM (it
    used to never yield to the event loop, so only the supervisor's SIGKILL ended it)."""
    path = jf.write_job(tmp_path / "job", job_extra="workers = 5\n")
    config = jf.load(path)
    meta = await h.open_meta(config)
    try:
        model = await h.prepare(config, meta)
        assert model.tasks_of(4) == []
        with (tmp_path / "worker.log").open("ab") as log:
            worker = h.start_worker(path, log, worker=4)
            try:
                await h.wait_resumed(meta, config, worker, 4)
                assert await h.stop(worker) == 0
            finally:
                h.kill(worker)
        report = (await read_state(meta, config)).workers[4]
        assert (report.tasks, report.reason, report.processed) == ([], "stopped", 0)
    finally:
        await meta.close()


async def test_sigusr1_logs_where_the_tasks_wait_and_the_worker_goes_on(
        tmp_path: Path) -> None:
    """SIGUSR1 to a running worker logs one stack per asyncio task (the worker's own
    `run_worker` among them); the worker keeps running and still stops cleanly."""
    path = jf.write_job(tmp_path / "job")
    config = jf.load(path)
    meta = await h.open_meta(config)
    try:
        await h.prepare(config, meta)
        log_file = tmp_path / "worker.log"
        with log_file.open("ab") as log:
            worker = h.start_worker(path, log)
            try:
                await h.wait_resumed(meta, config, worker)
                os.kill(worker.pid, signal.SIGUSR1)

                async def dumped() -> bool:
                    return "SIGUSR1:" in log_file.read_text(errors="replace")

                await h.wait_until(dumped, 30, "the task dump", worker)
                assert await h.stop(worker) == 0
            finally:
                h.kill(worker)
        text = log_file.read_text(errors="replace")
        dump = text[text.index("SIGUSR1:"):]
        assert "asyncio tasks" in dump.splitlines()[0]
        assert "in run_worker" in dump and "result = await worker.run()" in dump
    finally:
        await meta.close()
