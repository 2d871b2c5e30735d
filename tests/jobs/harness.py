"""Starting, watching and stopping the processes of a test's job, on either system.

`SampanRun` is a job folder run by `sampan run` in a session of its own (a test kills the
coordinator alone, one worker, or the whole process group), with its logs, one-shot
`sampan` commands, reads of its systems and waits that fail with the logs. The functions
below it run one worker: as a `sampan worker` subprocess (`start_worker`, `stop`, `kill`)
or in this process (`run_worker`, `FedWorker`). Every wait polls (`tests/polling.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO, Any, TypeVar

from jobs.jobfiles import PARTITIONS, REPO, load, streams, write_job
from jobs.outputs import Workload
from polling import apoll

from framework.config import JobConfig
from framework.coordinator.builder import build_job_model
from framework.metadata import CoordinatorState, publish_model, read_state
from framework.metadata.jobmodel import JobModel
from framework.systems import open_system
from framework.systems.base import Checkpoint, ProducerRecord, System
from framework.worker.runner import Worker, WorkerResult

__all__ = [
    "CLI",
    "REPO",
    "FedWorker",
    "SampanRun",
    "SteadyFeed",
    "WorkerResult",
    "at_epoch",
    "blocked_writing_stdout",
    "kill",
    "open_meta",
    "prepare",
    "processed",
    "produce",
    "run_worker",
    "stamped_job",
    "start_worker",
    "stop",
    "wait_resumed",
    "wait_until",
]

CLI = [sys.executable, "-m", "framework.cli"]
T = TypeVar("T")


async def wait_until(condition: Callable[[], Awaitable[T]], timeout: float, what: str,
                     process: subprocess.Popen[bytes] | None = None, *,
                     logs: Callable[[], str] = str) -> T:
    """Poll ``condition`` until it returns a truthy value, and return it; fail naming
    ``what`` (and ``logs()``) on timeout, or when ``process`` exited first."""
    deadline = time.monotonic() + timeout
    started = time.monotonic()
    while not (value := await condition()):
        if process is not None and process.poll() is not None:
            raise AssertionError(f"sampan {process.args[3]!s} exited with "
                                 f"{process.returncode} while waiting for {what}\n{logs()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}\n{logs()}")
        await apoll(started)
    return value


class SampanRun:
    """A job folder (job file ``job.toml``) run by `sampan run JOB --worker-logs logs`: the
    coordinator logs to ``coordinator.log``, each worker to ``logs/worker-N.log``. Reads
    go to the job's system ``system`` (its metadata system unless named), each on a fresh
    client. Subclasses write the job file, then call `reload`."""

    def __init__(self, folder: Path, *, system: str | None = None) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.path = folder / "job.toml"
        self.logs = folder / "logs"
        self.system_name = system
        self.process: subprocess.Popen[bytes] | None = None
        self.env: dict[str, str] = {}
        """Extra environment of `start` (its workers inherit it): fault injection."""
        self._log: IO[bytes] | None = None

    def reload(self) -> JobConfig:
        """Read the job file again (a running coordinator sees it only after a restart)."""
        self.config: JobConfig = load(self.path)
        return self.config

    # -- processes --------------------------------------------------------------------------
    def start(self) -> subprocess.Popen[bytes]:
        """`sampan run` in a new session; its output appended to coordinator.log."""
        assert self.process is None or self.process.poll() is not None, "already running"
        self._close_log()
        self._log = open(self.folder / "coordinator.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [*CLI, "run", str(self.path), "--worker-logs", str(self.logs)],
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), **self.env})
        return self.process

    async def stop(self, timeout: float = 120) -> int:
        """SIGINT `sampan run` (as Ctrl-C does) and wait for its exit status."""
        process = self.process
        assert process is not None
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        deadline = time.monotonic() + timeout
        while process.poll() is None:
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"sampan run ignored SIGINT for {timeout:g}s")
            await asyncio.sleep(0.05)
        self._close_log()
        return process.returncode

    def kill(self) -> None:
        """SIGKILL the whole session (coordinator and workers, also workers whose
        coordinator was killed alone) and reap it; idempotent."""
        if self.process is not None:
            if self.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)
            for pid in _session_pids(self.process.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self._close_log()

    def kill_coordinator(self) -> None:
        """SIGKILL the coordinator process only (its workers get SIGTERM from the kernel)."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    async def kill_worker(self, worker: int) -> int:
        """SIGKILL worker ``worker`` by the pid the coordinator's status gives; its pid."""
        pid = (await self.state()).status.worker_pids[worker]
        os.kill(pid, signal.SIGKILL)
        return pid

    def worker_pids(self) -> dict[int, int]:
        """Worker id → pid of the coordinator's running `sampan worker` children."""
        assert self.process is not None
        found = {}
        for pid in _children(self.process.pid):
            with contextlib.suppress(OSError, ValueError):
                argv = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
                if b"worker" in argv and b"--worker" in argv:
                    found[int(argv[argv.index(b"--worker") + 1])] = pid
        return found

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def sampan(self, *args: str, stdin: str | None = None,
               env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """A one-shot `sampan` command (``{job}`` in ``args`` is this job's file)."""
        argv = [a.replace("{job}", str(self.path)) for a in args]
        return subprocess.run([*CLI, *argv], input=stdin, capture_output=True, text=True,
                              timeout=120, cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})

    def status(self) -> tuple[int, dict[str, Any]]:
        """`sampan status --json`: its exit status and document ({} when unreadable)."""
        done = self.sampan("status", "{job}", "--json")
        try:
            return done.returncode, json.loads(done.stdout)
        except ValueError:
            return done.returncode, {}

    # -- logs -------------------------------------------------------------------------------
    def coordinator_log(self) -> str:
        path = self.folder / "coordinator.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def logs_text(self, tail: int = 3000) -> str:
        """The coordinator's log and every worker's (their tails), for failure messages."""
        parts = [self.folder / "coordinator.log", *sorted(self.logs.glob("worker-*.log"))]
        return "\n".join(f"--- {p.name}:\n{p.read_text(errors='replace')[-tail:]}"
                         for p in parts if p.exists())

    # -- the job's system -------------------------------------------------------------------
    async def call(self, fn: Callable[[System], Awaitable[T]]) -> T:
        """``fn`` on a freshly started system (fresh metadata), closed afterwards."""
        system = open_system(self.config.system(self.system_name or
                                                self.config.metadata_system))
        await system.start()
        try:
            return await fn(system)
        finally:
            await system.close()

    async def create_streams(self, streams: Mapping[str, int]) -> None:
        async def create(system: System) -> None:
            for stream, partitions in streams.items():
                await system.create_stream(stream, partitions)
        await self.call(create)

    async def expand_stream(self, stream: str, partitions: int) -> None:
        await self.call(lambda s: s.expand_stream(stream, partitions))

    async def send(self, records: Sequence[ProducerRecord]) -> None:
        await self.call(lambda s: s.produce(records))

    async def state(self) -> CoordinatorState:
        return await self.call(lambda s: read_state(s, self.config))

    async def checkpoints(self) -> dict[str, Checkpoint]:
        return await self.call(lambda s: s.read_checkpoints(self.config.name))

    # -- waiting ----------------------------------------------------------------------------
    async def wait(self, condition: Callable[[], Awaitable[T]], what: str,
                   timeout: float = 120, *, running: bool = True) -> T:
        """Poll ``condition`` until truthy and return its value; fail naming ``what`` (with
        the logs) on timeout, or when ``running`` and `sampan run` exited."""
        return await wait_until(condition, timeout, what,
                                self.process if running else None, logs=self.logs_text)

    async def wait_epoch(self, epoch: int, workers: int | None = None) -> CoordinatorState:
        """Until epoch ``epoch`` is published and every worker (``workers``, the job's
        count unless given) reported running it."""
        count = workers if workers is not None else self.config.workers

        async def ready() -> CoordinatorState | None:
            state = await self.state()
            running = (state.model is not None and state.model.epoch == epoch
                       and state.status.epoch == epoch
                       and all(w in state.workers and state.workers[w].epoch == epoch
                               and state.workers[w].stopped_ms is None for w in range(count)))
            return state if running else None
        return await self.wait(ready, f"epoch {epoch} running on {count} workers")

    async def wait_expansions(self, changes: set[str], workers: int) -> CoordinatorState:
        """Until every change (``"local.s 2→4"``) is recorded — expansions detected together
        share one record and one model — and the latest model runs on every worker."""
        async def recorded() -> bool:
            return changes <= self.changes(await self.state())
        await self.wait(recorded, f"expansions {sorted(changes)}")
        model = (await self.state()).model
        assert model is not None
        return await self.wait_epoch(model.epoch, workers)

    @staticmethod
    def changes(state: CoordinatorState) -> set[str]:
        """Every stream change the expansions recorded."""
        return {change for event in state.status.expansions
                for change in event.change.split(", ")}


def _stat_fields(pid: str) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, session…)."""
    return (Path("/proc") / pid / "stat").read_text().rsplit(")", 1)[1].split()


def _children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                if int(_stat_fields(entry.name)[1]) == parent:
                    found.append(int(entry.name))
    return found


def _session_pids(session: int) -> list[int]:
    """Processes still in ``session`` (workers whose coordinator was killed alone)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                if int(_stat_fields(entry.name)[3]) == session:
                    found.append(int(entry.name))
    return found


WRITE_SYSCALL = {"x86_64": 1, "aarch64": 64}[platform.machine()]
"""write(2)'s number in ``/proc/PID/syscall`` on this machine."""


def blocked_writing_stdout(process: subprocess.Popen[bytes]) -> bool:
    """Whether ``process`` sleeps in a write(2) to its stdout: its reader takes nothing and
    the pipe or terminal between them is full."""
    try:
        fields = Path(f"/proc/{process.pid}/syscall").read_text().split()
    except OSError:  # exited
        return False
    return len(fields) > 1 and fields[0] == str(WRITE_SYSCALL) and int(fields[1], 16) == 1


# -- the sum job's system, without `sampan run` ---------------------------------------------
async def open_meta(config: JobConfig, timeout_s: float | None = None) -> System:
    """The job's metadata system, started; ``timeout_s`` replaces its client timeout (the
    test's own reads and writes only: the job keeps its own)."""
    settings = config.system(config.metadata_system)
    if timeout_s is not None:
        settings = replace(settings, client_options={**settings.client_options,
                                                     "timeout_s": timeout_s})
    system = open_system(settings)
    await system.start()
    return system


async def prepare(config: JobConfig, system: System) -> JobModel:
    """Create the sum job's streams and publish its first job model (what `sampan run`
    does)."""
    events, sums = streams(config)
    await system.create_stream(events, PARTITIONS, exist_ok=True)
    await system.create_stream(sums, PARTITIONS, exist_ok=True)
    await system.create_stream("dead-letters", 1, exist_ok=True)
    model = build_job_model(config, {config.inputs[0]: PARTITIONS}, None)
    changelog = config.changelog_stream("totals").partition(".")[2]
    await system.create_stream(changelog, model.changelog_partitions, compacted=True,
                               exist_ok=True)
    return await publish_model(system, config, model)


async def produce(system: System, records: Sequence[ProducerRecord]) -> None:
    """Write ``records`` in batches."""
    for start in range(0, len(records), 10_000):
        await system.produce(records[start:start + 10_000])


async def stamped_job(folder: Path, prefix: str, system: str, bootstrap: str | None
                      ) -> tuple[JobConfig, System, Workload]:
    """A fresh sum job with stamped outputs (`StampedSumTask`) on ``system``, its metadata
    system opened, and the workload of its input."""
    name = f"{prefix}-{system}-{int(time.time() * 1000)}"
    config = load(write_job(folder, name=name, system=system, bootstrap=bootstrap,
                            events=name, task="sum_task:StampedSumTask"))
    return config, await open_meta(config), Workload(keys=40, stream=name)


# -- one worker as a `sampan worker` subprocess ---------------------------------------------
def start_worker(path: Path, log: IO[bytes], worker: int = 0) -> subprocess.Popen[bytes]:
    """`sampan worker JOB --worker N` as a subprocess in its own session."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [*CLI, "worker", str(path), "--worker", str(worker)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env, cwd=REPO)


def kill(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL ``process`` (if still running) and reap it."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(30)


async def stop(process: subprocess.Popen[bytes], timeout: float = 30) -> int:
    """SIGTERM ``process`` and wait for its exit status (SIGKILL if it hangs)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while process.poll() is None:
        if time.monotonic() > deadline:
            kill(process)
            raise AssertionError(f"worker ignored SIGTERM for {timeout:g}s")
        await asyncio.sleep(0.05)
    return process.returncode


async def wait_resumed(system: System, config: JobConfig, process: subprocess.Popen[bytes],
                       worker: int = 0, timeout: float = 30) -> None:
    """Wait until ``process`` (worker ``worker``) reported its tasks running."""
    async def resumed() -> bool:
        report = (await read_state(system, config)).workers.get(worker)
        return report is not None and report.resumed_ms is not None

    await wait_until(resumed, timeout, f"worker {worker}'s start report", process)


# -- one worker in this process -------------------------------------------------------------
async def run_worker(config: JobConfig, model: JobModel, records: int,
                     timeout: float = 60) -> tuple[Worker, WorkerResult]:
    """Run a worker in-process until it has processed or skipped ``records``, then stop it."""
    worker = Worker(config, 0, model=model)
    running = asyncio.create_task(worker.run())
    deadline = time.monotonic() + timeout
    while sum(i.processed + i.skipped for i in worker.instances) < records:
        if running.done():
            return worker, await running  # raises what stopped it
        if time.monotonic() > deadline:
            worker.stop.set()
            await running
            raise AssertionError(f"worker did not process {records} records in {timeout:g}s")
        await asyncio.sleep(0.01)
    worker.stop.set()
    return worker, await running


class SteadyFeed:
    """Steady input to every partition (20 records every 50 ms) until `stop`."""

    def __init__(self, system: System, work: Workload) -> None:
        self._feeding = True
        self._task = asyncio.create_task(self._feed(system, work))

    async def _feed(self, system: System, work: Workload) -> None:
        while self._feeding:
            await produce(system, work.records(20))
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        self._feeding = False
        await self._task


class FedWorker:
    """An in-process worker run under a `SteadyFeed` (``async with``); leaving the block
    stops the feed and the worker, whose result `result` then gives."""

    def __init__(self, worker: Worker, system: System, work: Workload) -> None:
        self.worker = worker
        self._system = system
        self._work = work

    async def __aenter__(self) -> FedWorker:
        self.running = asyncio.create_task(self.worker.run())
        self.feed = SteadyFeed(self._system, self._work)
        return self

    async def __aexit__(self, *_: object) -> None:
        self.worker.stop.set()
        with contextlib.suppress(Exception):  # stopped already, or failed: said elsewhere
            await self.feed.stop()

    async def drain(self) -> None:
        """Stop the feed and wait until every record written was processed."""
        await self.feed.stop()
        await wait_until(processed(self.worker, self._work.count), 60, "every record")

    async def result(self) -> WorkerResult:
        return await self.running


def at_epoch(worker: Worker, epoch: int) -> Callable[[], Awaitable[bool]]:
    """A `wait_until` condition: ``worker`` runs the model of ``epoch``."""
    async def there() -> bool:
        return worker.model is not None and worker.model.epoch == epoch
    return there


def processed(worker: Worker, count: int) -> Callable[[], Awaitable[bool]]:
    """A `wait_until` condition: ``worker`` processed at least ``count`` records."""
    async def enough() -> bool:
        return sum(i.processed for i in worker.instances) >= count
    return enough
