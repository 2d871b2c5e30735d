"""`sampan run` starts its workers first (`framework.coordinator.early`) where there is a
core for each process: before its own imports and connections, so their start overlaps
the coordinator's. They wait for go and write nothing before it; a run that stops before
its go ends them unused; one that ended before its go is reported, then started again."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from jobs.harness import CLI, REPO
from jobs.outputs import keys
from jobs.runs import CountJob

from framework.coordinator.early import WORKERS_FIRST_ENV, workers_first

WORKER_ONLY_CRASH = '''\
import sys

from count_task import CountTask  # noqa: F401

if "worker" in sys.argv:  # the coordinator (`sampan run`) loads it fine
    raise RuntimeError("crash_in_workers does not load in a worker process")
'''


def test_workers_go_first_only_when_the_variable_asks_for_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Off by default (a second error line from a worker started that early, and slower
    on two cores), whatever the machine's cores."""
    monkeypatch.delenv(WORKERS_FIRST_ENV, raising=False)
    assert not workers_first()
    monkeypatch.setenv(WORKERS_FIRST_ENV, "1")
    assert workers_first()
    monkeypatch.setenv(WORKERS_FIRST_ENV, "0")
    assert not workers_first()


def _holding(path: Path) -> bool:
    """Whether any process holds ``path`` open (Linux /proc)."""
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            if any(os.readlink(fd) == str(path) for fd in fd_dir.iterdir()):
                return True
        except OSError:
            continue
    return False


def _closed_port() -> int:
    """A port of 127.0.0.1 nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_run_that_cannot_reach_its_broker_has_started_its_workers_and_ends_them(
        tmp_path: Path) -> None:
    """The workers are launched before the coordinator connects: here it never does
    (connection refused), and they end with it, unused, without a traceback."""
    (tmp_path / "count_task.py").write_text((REPO / "tests/coordinator/count_task.py")
                                            .read_text())
    job = tmp_path / "job.toml"
    job.write_text(f"""\
[job]
name = "unreachable"
task = "count_task:CountTask"
inputs = ["kafka.words"]
workers = 2

[systems.kafka]
type = "kafka"
bootstrap = "127.0.0.1:{_closed_port()}"

[streams."kafka.words"]
partitions = 2

[stores.counts]
""")
    logs = tmp_path / "logs"
    done = subprocess.run([*CLI, "run", str(job), "--worker-logs", str(logs)],
                          capture_output=True, text=True, timeout=300, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO),
                               WORKERS_FIRST_ENV: "1"})  # whatever this machine's cores
    assert done.returncode == 2, done.stderr
    assert "connection refused" in done.stderr, done.stderr
    for worker in (0, 1):
        log = logs / f"worker-{worker}.log"
        assert log.exists(), f"worker {worker} was not started before the connection"
        assert not _holding(log), f"worker {worker} outlived `sampan run`"
        assert "Traceback" not in log.read_text(errors="replace")


async def test_a_worker_that_ended_before_its_go_is_reported_and_started_again(
        make_job: Callable[..., CountJob]) -> None:
    """Its exit and error line are said when the go finds it gone; the worker started in
    its place fails the same way (exit 5), which stops the job with that error."""
    job = make_job("early-crash", {"words": 2}, workers=1)
    (job.folder / "crash_in_workers.py").write_text(WORKER_ONLY_CRASH)
    job.path.write_text(job.path.read_text()
                        .replace("count_task:CountTask", "crash_in_workers:CountTask")
                        .replace('path = "data"\n',
                                 'path = "data"\nclient_options = { busy_timeout_ms = 600000 }\n'))
    job.reload()
    await job.create("words", 2)
    await job.produce("words", keys(10), 1)
    [database] = (job.folder / "data").glob("*.sqlite3")
    writer = sqlite3.connect(database, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # the coordinator's first write waits: no go yet
    log = job.logs / "worker-0.log"
    try:
        job.start()

        async def crashed() -> bool:
            return log.exists() and "does not load in a worker process" in log.read_text(
                errors="replace") and not job.worker_pids()
        await job.wait(crashed, "the worker started ahead to end", timeout=300)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    process = job.process
    assert process is not None

    async def exited() -> bool:
        return process.poll() is not None
    await job.wait(exited, "sampan run to stop the job", timeout=300, running=False)
    assert process.returncode == 2, job.logs_text()
    lines = job.coordinator_log().splitlines()
    [reported] = [line for line in lines if "before it was told to go" in line]
    assert "worker 0 (started ahead) exited with status 5 before it was told to go: " \
        in reported, reported
    assert "crash_in_workers does not load in a worker process" in reported, reported
    assert "starting it again" in reported, reported
    assert "crash_in_workers does not load in a worker process" in lines[-1], lines[-1]
