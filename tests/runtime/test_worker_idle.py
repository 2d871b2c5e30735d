"""A worker the job model gives no task (more workers than tasks) still obeys SIGTERM."""

from __future__ import annotations

from pathlib import Path

from jobs import harness as h

from framework.metadata import read_state


async def test_a_worker_without_tasks_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    """4 tasks on 5 workers: worker 4 idles without spinning and exits 0 on SIGTERM (it
    used to never yield to the event loop, so only the supervisor's SIGKILL ended it)."""
    path = h.write_job(tmp_path / "job", job_extra="workers = 5\n")
    config = h.load(path)
    meta = await h.open_meta(config)
    try:
        model = await h.prepare(config, meta)
        assert model.tasks_of(4) == []
        with (tmp_path / "worker.log").open("ab") as log:
            worker = h.start_worker(path, log, worker=4)
            try:
                async def running() -> bool:
                    report = (await read_state(meta, config)).workers.get(4)
                    return report is not None and report.resumed_ms is not None

                await h.wait_until(running, 30, "the idle worker's start report", worker)
                assert await h.stop(worker) == 0
            finally:
                h.kill(worker)
        report = (await read_state(meta, config)).workers[4]
        assert (report.tasks, report.reason, report.processed) == ([], "stopped", 0)
    finally:
        await meta.close()
