"""One coordinator per job: a second `sampan run` refuses, a dead one is replaced, a stale
worker stops by itself and never blocks the current job."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from jobs.harness import CLI, REPO
from jobs.outputs import keys
from jobs.runs import CountJob

from framework.config import load_config
from framework.systems.local.schema import SCHEMA_VERSION, LocalOptions, connect
from framework.systems.local.system import LocalSystem


def second_run(job: CountJob, data_dir: str | None = None) -> subprocess.CompletedProcess[str]:
    """`sampan run` of the job again; with ``data_dir``, from a copy of its job file keeping
    its state there (as from another machine: past the state folder's lock, to the lease)."""
    path = job.path
    if data_dir is not None:
        path = job.path.with_name("elsewhere.toml")
        path.write_text(job.path.read_text().replace("[job]\n",
                                                     f'[job]\ndata_dir = "{data_dir}"\n', 1))
    return subprocess.run([*CLI, "run", str(path)], capture_output=True, text=True,
                          timeout=60, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})


async def test_a_second_run_refuses_at_once_naming_the_running_coordinator(
        make_job: Callable[..., CountJob]) -> None:
    """Memory stores (no RocksDB LOCK to hide behind): still exactly one coordinator — on
    the same state folder the folder's lock refuses the second run, elsewhere the lease."""
    job = make_job("twice", {"words": 2})
    job.path.write_text(job.path.read_text().replace("[stores.counts]",
                                                     '[stores.counts]\ntype = "memory"'))
    job.config = load_config(job.path)
    await job.create("words", 2)
    await job.produce("words", keys(40), 5)
    first = job.start()
    await job.wait_epoch(1)
    same = second_run(job)
    assert same.returncode == 2, same.stderr
    assert f"job 'twice' already runs on this machine with state folder " \
        f"{job.config.state_dir} (sampan run, pid {first.pid}); stop that one first" \
        in same.stderr
    done = second_run(job, data_dir="elsewhere")  # at once: its holder is alive, no wait
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert re.fullmatch(
        rf"sampan run: error: job 'twice' is already running: its coordinator is pid "
        rf"{first.pid} on host {re.escape(socket.gethostname())}, running since "
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\. Stop it first \(Ctrl-C in its terminal, or "
        rf"`kill {first.pid}` on \S+: its workers commit and stop\), then run again\. A "
        r"coordinator that died is replaced automatically: its lease expires within 10 s of "
        r"its last renewal \(this one in \d+\.\d s\)", line), line
    await job.produce("words", keys(40), 5)
    await job.wait_outputs()
    state = await job.state()
    assert state.model is not None and state.model.epoch == 1  # nobody published epoch 2
    assert state.status.coordinator_pid == first.pid
    assert await job.stop() == 0
    await job.assert_exact()


async def test_a_killed_coordinator_is_replaced_without_cleanup(
        make_job: Callable[..., CountJob]) -> None:
    """SIGKILL the coordinator alone (its workers get SIGTERM and commit): the next `sampan
    run` takes the job over at once, epochs keep increasing, results stay exact."""
    job = make_job("replaced", {"words": 2})
    await job.create("words", 2)
    await job.produce("words", keys(40), 5)
    first = job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    os.kill(first.pid, signal.SIGKILL)
    first.wait(30)
    await job.produce("words", keys(40), 5)
    job.start()
    await job.wait_epoch(2)
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()
    assert "took over the lease of job 'replaced' from coordinator pid " \
        f"{first.pid}, which is no longer running" in job.coordinator_log()


async def test_a_live_lease_elsewhere_blocks_until_it_expires(
        make_job: Callable[..., CountJob]) -> None:
    """A lease held from another host that stops renewing is taken once it expired.

    The other host's lease lasts 10 minutes while the refusal is checked (however slowly
    `sampan run` starts, it finds the lease live), then its last renewal is for 1 s."""
    job = make_job("elsewhere", {"words": 2})
    await job.create("words", 2)
    holder = json.dumps({"pid": 4242, "host": "another-host", "since_ms": 0})

    async def renew(ttl_ms: int) -> None:
        system = LocalSystem("local", job.folder / "data")
        try:
            assert await system.acquire_lease("elsewhere", "their-token", holder, ttl_ms,
                                              int(time.time() * 1000)) is None
        finally:
            await system.close()

    await renew(600_000)
    done = second_run(job)
    assert done.returncode == 2
    assert "its coordinator is pid 4242 on host another-host" in done.stderr
    await renew(1_000)  # the other host's last renewal
    await asyncio.sleep(1.5)  # past its expiry
    await job.produce("words", keys(10), 2)
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()


async def test_a_stray_worker_stops_by_itself_and_never_blocks_the_job(
        make_job: Callable[..., CountJob]) -> None:
    """An idle `sampan worker` of epoch 1 left running: the next `sampan run` publishes epoch
    2; the stray notices its fence on its own (exit 3, nothing committed) and the new worker,
    waiting for the store it held, goes on — exact."""
    job = make_job("stray", {"words": 2})
    await job.create("words", 2)
    await job.produce("words", keys(20), 3)
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    assert await job.stop() == 0
    job.process = None  # the stopped run is not what the next waits are about
    with (job.folder / "stray.log").open("ab") as out:
        stray = subprocess.Popen([*CLI, "worker", str(job.path), "--worker", "0"], stdout=out,
                                 stderr=out, cwd=REPO, start_new_session=True,
                                 env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        async def stray_running() -> bool:
            report = (await job.state()).workers.get(0)
            return report is not None and report.pid == stray.pid and (
                report.resumed_ms is not None)
        await job.wait(stray_running, "the stray worker to open its stores")
        await job.produce("words", keys(20), 3)
        job.start()
        await job.wait_epoch(2)
        await job.wait_outputs()
        assert stray.wait(30) == 3
        assert "fenced: a newer job model exists; stopping without committing" in (
            job.folder / "stray.log").read_text()
        assert await job.stop() == 0
    finally:
        if stray.poll() is None:
            os.killpg(stray.pid, signal.SIGKILL)
            stray.wait(30)
    await job.assert_exact()
    assert "did not stop" not in job.coordinator_log()


def test_a_log_of_schema_1_gains_the_new_tables_when_opened(tmp_path: Path) -> None:
    """An existing log of schema 1 gains the leases and growth tables (in-place upgrade)."""
    folder = tmp_path
    connect(folder, LocalOptions()).close()
    raw = sqlite3.connect(folder / "log.sqlite3")
    raw.execute("DROP TABLE leases")
    raw.execute("DROP TABLE growth")
    raw.execute("PRAGMA user_version = 1")
    raw.commit()
    raw.close()
    conn = connect(folder, LocalOptions())
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type='table'")}
    assert {"leases", "growth"} <= tables
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5
    conn.close()
