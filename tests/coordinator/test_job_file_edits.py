"""Editing job.toml while the job runs: the job keeps running what it started with."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Callable

from jobs.harness import CLI, REPO
from jobs.outputs import keys
from jobs.runs import CountJob

from framework.config import load_config
from framework.drill.verify import read_stream


async def test_an_edit_while_running_is_reported_and_restarted_workers_keep_going(
        make_job: Callable[..., CountJob]) -> None:
    """Edit the job file, then SIGKILL a worker: it restarts on the started configuration
    (never "built from another version of job.toml"), status reports the edit, exact."""
    job = make_job("edited", {"words": 2})
    await job.create("words", 2)
    await job.produce("words", keys(40), 5)
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    original = job.path.read_text()
    job.path.write_text(original.replace("commit_interval_ms = 100", "commit_interval_ms = 250")
                        + "\n[errors]\nprocess_policy = \"skip\"\n")

    async def reported() -> bool:
        return (await job.state()).status.config_change is not None
    await job.wait(reported, "the coordinator to report the edit")
    change = (await job.state()).status.config_change
    assert change is not None
    change = change.change
    assert change == "changed errors.process_policy, job.commit_interval_ms"
    status = job.sampan("status", "{job}")
    assert ("JOB FILE EDITED while running (changed errors.process_policy, "
            "job.commit_interval_ms): the job runs the configuration it started with; restart "
            "`sampan run` to apply it") in status.stdout

    victim = (await job.state()).status.worker_pids[1]
    os.kill(victim, signal.SIGKILL)

    async def restarted() -> bool:
        report = (await job.state()).workers.get(1)
        return report is not None and report.pid != victim and report.resumed_ms is not None
    await job.wait(restarted, "worker 1 restarted")
    await job.produce("words", keys(40), 5)
    await job.wait_outputs()
    assert "another version" not in (job.logs / "worker-1.log").read_text()

    job.path.write_text("[job\nbroken")  # an edit that does not even parse

    async def broken() -> bool:
        found = (await job.state()).status.config_change
        return found is not None and found.change.startswith("it no longer loads")
    await job.wait(broken, "the coordinator to report the unreadable job file")
    job.path.write_text(original)

    async def back() -> bool:
        return (await job.state()).status.config_change is None
    await job.wait(back, "the coordinator to see the original job file again")
    assert await job.stop() == 0
    await job.assert_exact()
    assert "was edited while the job runs" in job.coordinator_log()


async def test_two_job_files_in_one_folder_keep_their_own_state(
        make_job: Callable[..., CountJob]) -> None:
    """Two jobs in one folder, sharing the data_dir, the log and a store name, run side by side
    (before, both opened state/stores/counts/<task> and one failed on the RocksDB LOCK)."""
    alpha = make_job("alpha", {"words": 2})
    folder = alpha.folder
    (folder / "beta_task.py").write_text(
        (folder / "count_task.py").read_text().replace('"local.counts"', '"local.counts-beta"'))
    beta_file = folder / "beta.toml"
    beta_file.write_text(alpha.path.read_text().replace('name = "alpha"', 'name = "beta"')
                         .replace("count_task:", "beta_task:")
                         .replace('[streams."local.counts"]', '[streams."local.counts-beta"]'))
    await alpha.create("words", 2)
    await alpha.produce("words", keys(30), 10)
    beta = subprocess.Popen([*CLI, "run", str(beta_file), "--worker-logs", str(folder / "blogs")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO,
                            start_new_session=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        alpha.start()
        await alpha.wait_epoch(1)
        await alpha.wait_outputs()

        async def beta_done() -> bool:
            ranges = await alpha.call(lambda s: s.offsets("counts-beta"))
            return sum(r.end for r in ranges.values()) >= alpha.truth.total
        await alpha.wait(beta_done, "beta's outputs", timeout=90)
        assert await alpha.stop() == 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(beta.pid, signal.SIGKILL)
        beta.wait(30)
    await alpha.assert_exact()
    rows = await alpha.call(lambda s: read_stream(s, "counts-beta"))
    found: dict[str, list[tuple[int, int]]] = {}
    for partition in rows.values():
        for key, value in partition:
            data = json.loads(value)
            found.setdefault(key.decode(), []).append((data["count"], data["seq"]))
    assert dict(sorted(found.items())) == alpha.truth.expected_outputs()
    assert sorted(p.name for p in (folder / "state").iterdir()) == ["alpha", "beta"]


async def test_two_jobs_of_one_name_on_two_logs_are_told_they_share_a_state_folder(
        make_job: Callable[..., CountJob]) -> None:
    """The tutorial's trap: a second job file with the same job.name but its metadata on
    another system (here another local log) shares state/<name>: its coordinator says so
    at start, and the worker says why it rebuilds the store (not "recreated or truncated")."""
    job = make_job("twin", {"words": 2})
    await job.create("words", 2)
    await job.produce("words", keys(20), 3)
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    assert await job.stop() == 0
    first = job.path
    twin = job.folder / "twin-elsewhere.toml"
    twin.write_text(first.read_text().replace('path = "data"', 'path = "data-elsewhere"'))
    job.path = twin
    job.config = load_config(twin)
    await job.create("words", 2)
    await job.produce("words", keys(20), 1)
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs(total=20)
    assert await job.stop() == 0
    log = job.coordinator_log()
    assert (f"WARNING state folder {job.config.state_dir} was last used by {first}, whose "
            f"metadata is on local {(job.folder / 'data').resolve()}; this run ({twin}) keeps "
            f"it on local {(job.folder / 'data-elsewhere').resolve()}. Both jobs are named "
            f"'twin', so they share this folder") in log
    workers = "".join(p.read_text() for p in job.logs.glob("worker-*.log"))
    assert ": it was written from another changelog of this name (another job with the same " \
        "job.name sharing this state folder, or the changelog was deleted and created " \
        "again)" in workers
