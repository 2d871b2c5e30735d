"""Helpers of the expansion tests on real Kafka: the sum job as a `sampan run` subprocess.

A `KafkaSumJob` is a folder with the per-key sum task (`tests/jobs/sum_task.py`) and a job
file whose topics are named after the job (``<name>-in`` → ``<name>-in-sums``), so tests
share one broker. Every read opens a fresh `KafkaSystem` (no cached partition counts).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO, Any, TypeVar

from polling import apoll

from framework.config import JobConfig, load_config
from framework.drill.timeline import committed_and_end
from framework.drill.verify import read_stream
from framework.metadata import CoordinatorState, read_state
from framework.systems import open_system
from framework.systems.base import ProducerRecord, System

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CLI = [sys.executable, "-m", "framework.cli"]
T = TypeVar("T")


class KafkaSumJob:
    """One sum job on Kafka: its folder, job file and `sampan run` process."""

    def __init__(self, folder: Path, bootstrap: str, name: str, *, store: str = "rocksdb",
                 guarantee: str = "at-least-once", partitions: int = 2, workers: int = 2
                 ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "tests" / "jobs" / "sum_task.py", folder / "sum_task.py")
        self.folder, self.name = folder, name
        self.events, self.sums = f"{name}-in", f"{name}-in-sums"
        self.path = folder / "job.toml"
        self.logs = folder / "logs"
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.path.write_text(f"""\
[job]
name = "{name}"
task = "sum_task:SumTask"
inputs = ["kafka.{self.events}"]
workers = {workers}
commit_interval_ms = 100
guarantee = "{guarantee}"

[coordinator]
monitor_interval_ms = 300
worker_stop_timeout_ms = 20000
worker_restart_backoff_ms = 100

[systems.kafka]
type = "kafka"
bootstrap = "{bootstrap}"

[streams."kafka.{self.events}"]
partitions = {partitions}

[streams."kafka.{self.sums}"]
partitions = 2

[stores.totals]
type = "{store}"
""")
        self.config: JobConfig = load_config(self.path)

    # -- processes --------------------------------------------------------------------
    def start(self) -> None:
        """`sampan run JOB --worker-logs logs` in its own session, output to coordinator.log."""
        self._log = open(self.folder / "coordinator.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [*CLI, "run", str(self.path), "--worker-logs", str(self.logs)],
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)})

    async def stop(self, timeout: float = 60) -> int:
        """SIGINT `sampan run` (Ctrl-C) and wait for its exit status."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        deadline = time.monotonic() + timeout
        while self.process.poll() is None:
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"sampan run ignored SIGINT for {timeout:g}s")
            await asyncio.sleep(0.1)
        self._close_log()
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL the whole process group (coordinator and workers); idempotent."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def logs_text(self) -> str:
        """The coordinator's log and every worker's, for failure messages."""
        parts = [self.folder / "coordinator.log", *sorted(self.logs.glob("worker-*.log"))]
        return "\n".join(f"--- {p.name}:\n{p.read_text(errors='replace')[-2500:]}"
                         for p in parts if p.exists())

    def sampan(self, *args: str) -> subprocess.CompletedProcess[str]:
        """A one-shot `sampan` command; ``{job}`` in ``args`` is this job's file."""
        argv = [a.replace("{job}", str(self.path)) for a in args]
        return subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=120,
                              cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})

    def expand(self, partitions: int) -> None:
        """`sampan streams expand kafka.<name>-in --partitions N` (CreatePartitions)."""
        done = self.sampan("streams", "expand", f"kafka.{self.events}", "--partitions",
                           str(partitions), "--job", "{job}")
        assert done.returncode == 0, done.stdout + done.stderr

    # -- the broker -------------------------------------------------------------------
    async def call(self, fn: Callable[[System], Awaitable[T]]) -> T:
        """``fn`` on a freshly started system (fresh metadata), closed afterwards."""
        system = open_system(self.config.system("kafka"))
        await system.start()
        try:
            return await fn(system)
        finally:
            await system.close()

    async def produce(self, records: list[ProducerRecord]) -> None:
        await self.call(lambda s: s.produce(records))

    async def state(self) -> CoordinatorState:
        return await self.call(lambda s: read_state(s, self.config))

    async def outputs(self) -> dict[str, list[dict[str, int]]]:
        """Every output per key, in output order."""
        import json

        rows = await self.call(lambda s: read_stream(s, self.sums))
        found: dict[str, list[dict[str, int]]] = {}
        for partition in rows.values():
            for key, value in partition:
                found.setdefault(key.decode(), []).append(json.loads(value))
        return found

    async def store(self) -> dict[str, int]:
        """The totals store as its changelog tells it (latest value per key)."""
        import json

        changelog = self.config.changelog_ref("totals").stream
        rows = await self.call(lambda s: read_stream(s, changelog))
        return {k.decode(): json.loads(v) for part in rows.values() for k, v in part}

    # -- waiting ----------------------------------------------------------------------
    async def wait(self, condition: Callable[[], Awaitable[Any]], what: str,
                   timeout: float = 120) -> Any:
        """Poll ``condition`` until truthy; fail naming ``what`` (with logs) on timeout or
        when `sampan run` exited."""
        deadline = time.monotonic() + timeout
        started = time.monotonic()
        while not (value := await condition()):
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"sampan run exited with {self.process.returncode} "
                                     f"while waiting for {what}\n{self.logs_text()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:g}s waiting for {what}\n"
                                     f"{self.logs_text()}")
            await apoll(started)
        return value

    async def wait_epoch(self, epoch: int) -> CoordinatorState:
        """Until ``epoch`` is published and every worker reported running it."""
        async def ready() -> CoordinatorState | None:
            state = await self.state()
            running = (state.model is not None and state.model.epoch == epoch
                       and all(w in state.workers and state.workers[w].epoch == epoch
                               and state.workers[w].stopped_ms is None
                               for w in range(self.config.workers)))
            return state if running else None
        return await self.wait(ready, f"epoch {epoch} running on every worker")  # type: ignore[no-any-return]

    async def wait_caught_up(self, produced: int) -> None:
        """Until every one of the ``produced`` input records is committed."""
        async def caught_up() -> bool:
            committed, end = await self.call(lambda s: committed_and_end(s, self.config))
            return end == produced and committed == end
        await self.wait(caught_up, f"all {produced} input records committed", timeout=180)
