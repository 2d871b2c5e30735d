"""An error a restart cannot fix stops the job at once with its one line: no restart, no
backoff (`framework.errors.PermanentError`, a worker's exit status 5). A raising
``process`` is restarted with backoff and then stops the job: tests/coordinator/test_cli.py,
`test_crash_loop_stops_the_job_naming_the_worker_log`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable

from jobs.outputs import keys
from jobs.runs import CountJob


async def exit_of(job: CountJob) -> subprocess.Popen[bytes]:
    """Wait for `sampan run` to exit by itself; the process."""
    process = job.process
    assert process is not None

    async def exited() -> bool:
        return process.poll() is not None
    job.process = None  # the exit is what we wait for
    await job.wait(exited, "sampan run to stop the job", timeout=120)
    job.process = process
    return process


def failed_status(job: CountJob) -> tuple[str, str]:
    """(state, error) of `sampan status --json`."""
    document = json.loads(job.sampan("status", "{job}", "--json").stdout)
    return document["state"], document["error"]


async def test_init_asking_for_an_undeclared_store_stops_the_job_at_once(
        make_job: Callable[..., CountJob]) -> None:
    job = make_job("undeclared", {"words": 2}, task="UndeclaredStoreTask", workers=1)
    await job.create("words", 2)
    await job.produce("words", keys(4), 1)
    job.start()
    process = await exit_of(job)
    line = ("task 'Partition 0' asked for store 'view', which the job file does not declare; "
            "add a [stores.view] table (declared: ['counts'])")
    log = job.coordinator_log()
    assert process.returncode == 2
    assert log.splitlines()[-1] == f"sampan run: error: {line}"
    assert "restarting worker" not in log
    assert f"worker 0 stopped on an error a restart cannot fix: {line}" in log
    assert (job.logs / "worker-0.log").read_text().splitlines()[-1] == (
        f"sampan worker: error: {line}")
    assert failed_status(job) == ("failed", line)


async def test_a_task_module_that_no_longer_imports_stops_the_job_at_once(
        make_job: Callable[..., CountJob]) -> None:
    """The task's module breaks while the job runs (a deploy needing a package not
    installed); the worker's next start cannot import it: the job stops, no restart loop."""
    job = make_job("unimportable", {"words": 2}, workers=1)
    await job.create("words", 2)
    await job.produce("words", keys(4), 1)
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    module = job.folder / "count_task.py"
    module.write_text("import numpyy  # not installed\n" + module.read_text())
    os.kill((await job.state()).status.worker_pids[0], signal.SIGKILL)
    process = await exit_of(job)
    line = (f'job.task = "count_task:CountTask" in {job.path}: importing module "count_task" '
            "failed: No module named 'numpyy'; install \"numpyy\"")
    log = job.coordinator_log()
    assert process.returncode == 2
    assert log.splitlines()[-1] == f"sampan run: error: {line}"
    assert log.count("restarting worker 0") == 1  # after the SIGKILL, and no more
    assert failed_status(job) == ("failed", line)
    assert await job.outputs() == job.truth.expected_outputs()  # committed before it stopped
