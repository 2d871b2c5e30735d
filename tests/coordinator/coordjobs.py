"""Helpers of the coordinator end-to-end tests: job files, `sampan run` subprocesses, truth.

A `Job` is a folder in ``tmp_path`` with the count task and a job file; `Job.start` runs
`sampan run` in its own session (so a test can kill the whole process group), and every
check reads the real local log on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from polling import apoll

from framework.config import JobConfig, load_config
from framework.drill.verify import read_stream
from framework.metadata import CoordinatorState, read_state
from framework.systems import open_system
from framework.systems.base import Checkpoint, ProducerRecord, System

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CLI = [sys.executable, "-m", "framework.cli"]


def job_text(name: str, inputs: Mapping[str, int], *, task: str = "CountTask", workers: int = 2,
             monitor_ms: int = 300, max_restarts: int = 5, stop_timeout_ms: int = 5000,
             extra: str = "", model_changes: str = "in-place") -> str:
    """A job file counting ``inputs`` (stream → partitions) into ``local.counts``."""
    streams = "".join(f'[streams."local.{s}"]\npartitions = {n}\n\n' for s, n in inputs.items())
    names = ", ".join(f'"local.{s}"' for s in inputs)
    return f"""\
[job]
name = "{name}"
task = "count_task:{task}"
inputs = [{names}]
workers = {workers}
commit_interval_ms = 100
{extra}
[coordinator]
monitor_interval_ms = {monitor_ms}
worker_stop_timeout_ms = {stop_timeout_ms}
worker_restart_backoff_ms = 100
max_worker_restarts = {max_restarts}
model_changes = "{model_changes}"

[systems.local]
type = "local"
path = "data"

{streams}[streams."local.counts"]
partitions = 2

[stores.counts]
"""


@dataclass
class Truth:
    """What was produced: per (stream, key) the sequence numbers 1..n, in order; and the
    ones a remedy made the job skip (`sampan streams discard-held`)."""

    sent: dict[str, int] = field(default_factory=dict)
    discarded: dict[str, set[int]] = field(default_factory=dict)

    def records(self, stream: str, keys: Sequence[str], rounds: int) -> list[ProducerRecord]:
        """``rounds`` records for each key, interleaved, with per-key sequence numbers."""
        batch = []
        for _ in range(rounds):
            for key in keys:
                name = f"{stream}/{key}"
                self.sent[name] = self.sent.get(name, 0) + 1
                value = json.dumps({"seq": self.sent[name]}).encode()
                batch.append(ProducerRecord(stream, key.encode(), value))
        return batch

    def discard(self, records: Sequence[ProducerRecord]) -> None:
        """``records`` (made by `records`) are skipped: no output is expected for them."""
        for record in records:
            name = f"{record.stream}/{(record.key or b'').decode()}"
            self.discarded.setdefault(name, set()).add(json.loads(record.value or b"")["seq"])

    def kept(self) -> dict[str, list[int]]:
        """Per (stream, key) the sequence numbers the job must process, in order."""
        kept = {name: [seq for seq in range(1, n + 1) if seq not in self.discarded.get(name, ())]
                for name, n in sorted(self.sent.items())}
        return {name: seqs for name, seqs in kept.items() if seqs}

    @property
    def total(self) -> int:
        return sum(map(len, self.kept().values()))

    def expected_outputs(self) -> dict[str, list[tuple[int, int]]]:
        """Exactly one output per kept input: counts 1..n with its sequence numbers."""
        return {name: list(enumerate(seqs, 1)) for name, seqs in self.kept().items()}

    def expected_store(self) -> dict[str, int]:
        return {name: len(seqs) for name, seqs in self.kept().items()}


class Job:
    """One job folder: its file, its log on disk, and its `sampan run` process."""

    def __init__(self, folder: Path, name: str, inputs: Mapping[str, int], **options: Any):
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(HERE / "count_task.py", folder / "count_task.py")
        self.folder = folder
        self.path = folder / "job.toml"
        self.logs = folder / "logs"
        self.process: subprocess.Popen[bytes] | None = None
        self.env: dict[str, str] = {}
        """Extra environment of `start` (its workers inherit it): fault injection."""
        self._log: IO[bytes] | None = None
        self.truth = Truth()
        self.write(name, inputs, **options)

    def write(self, name: str, inputs: Mapping[str, int], **options: Any) -> None:
        """(Re)write the job file; a running coordinator sees it only after a restart."""
        self.path.write_text(job_text(name, inputs, **options))
        self.config: JobConfig = load_config(self.path)

    # -- processes --------------------------------------------------------------------------
    def start(self) -> subprocess.Popen[bytes]:
        """`sampan run JOB --worker-logs logs` in a new session; output to coordinator.log."""
        assert self.process is None or self.process.poll() is not None, "already running"
        self._log = open(self.folder / "coordinator.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [*CLI, "run", str(self.path), "--worker-logs", str(self.logs)],
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), **self.env})
        return self.process

    async def stop(self, timeout: float = 30) -> int:
        """SIGINT the coordinator (as Ctrl-C does) and wait for its clean exit."""
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
        """SIGKILL the coordinator's whole process group (workers included) and reap it."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def coordinator_log(self) -> str:
        path = self.folder / "coordinator.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def sampan(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """A one-shot `sampan` command (``{job}`` in args is this job's file)."""
        argv = [a.replace("{job}", str(self.path)) for a in args]
        return subprocess.run([*CLI, *argv], input=stdin, capture_output=True, text=True,
                              timeout=60, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})

    # -- the log on disk --------------------------------------------------------------------
    async def system(self) -> System:
        system = open_system(self.config.system("local"))
        await system.start()
        return system

    async def call(self, fn: Callable[[System], Awaitable[Any]]) -> Any:
        system = await self.system()
        try:
            return await fn(system)
        finally:
            await system.close()

    async def create(self, stream: str, partitions: int) -> None:
        await self.call(lambda s: s.create_stream(stream, partitions))

    async def expand(self, stream: str, partitions: int) -> None:
        await self.call(lambda s: s.expand_stream(stream, partitions))

    async def produce(self, stream: str, keys: Sequence[str], rounds: int
                      ) -> list[ProducerRecord]:
        records = self.truth.records(stream, keys, rounds)
        await self.call(lambda s: s.produce(records))
        return records

    async def state(self) -> CoordinatorState:
        return await self.call(lambda s: read_state(s, self.config))  # type: ignore[no-any-return]

    async def checkpoints(self) -> dict[str, Checkpoint]:
        return await self.call(lambda s: s.read_checkpoints(self.config.name))  # type: ignore

    async def outputs(self) -> dict[str, list[tuple[int, int]]]:
        """Every output per (stream/key) as (count, seq), in output order."""
        rows = await self.call(lambda s: read_stream(s, "counts"))
        found: dict[str, list[tuple[int, int]]] = {}
        for partition in rows.values():
            for key, value in partition:
                data = json.loads(value)
                found.setdefault(key.decode(), []).append((data["count"], data["seq"]))
        return dict(sorted(found.items()))

    async def output_total(self) -> int:
        ranges = await self.call(lambda s: s.offsets("counts"))
        return sum(r.end for r in ranges.values())

    async def store(self) -> dict[str, int]:
        """The counts store as its changelog tells it (latest value per key)."""
        stream = self.config.changelog_stream("counts").partition(".")[2]
        rows = await self.call(lambda s: read_stream(s, stream))
        return {k.decode(): json.loads(v) for part in rows.values() for k, v in part}

    async def pad_changelog(self, partition: int, records: int) -> dict[str, int]:
        """Write ``records`` keys the task never reads into a changelog partition (restore load)."""
        stream = self.config.changelog_stream("counts").partition(".")[2]
        return await self.call(lambda s: _pad(s, stream, partition, records))  # type: ignore

    async def wait(self, condition: Callable[[], Awaitable[bool]], what: str,
                   timeout: float = 45) -> None:
        """Poll ``condition``; fail naming ``what`` on timeout or when `sampan run` exited."""
        deadline = time.monotonic() + timeout
        started = time.monotonic()
        while not await condition():
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"sampan run exited with {self.process.returncode} while "
                                     f"waiting for {what}:\n{self.coordinator_log()[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:g}s waiting for {what}:\n"
                                     f"{self.coordinator_log()[-3000:]}")
            await apoll(started)

    async def wait_outputs(self, total: int | None = None, timeout: float = 60) -> None:
        """Until the job emitted one output per produced record."""
        want = self.truth.total if total is None else total

        async def done() -> bool:
            return await self.output_total() >= want
        await self.wait(done, f"{want} outputs", timeout)

    async def wait_epoch(self, epoch: int, workers: int | None = None) -> CoordinatorState:
        """Until epoch ``epoch`` is published and every worker reported running it."""
        count = workers if workers is not None else self.config.workers
        result: list[CoordinatorState] = []

        async def ready() -> bool:
            state = await self.state()
            result[:] = [state]
            return (state.model is not None and state.model.epoch == epoch
                    and state.status.epoch == epoch
                    and all(w in state.workers and state.workers[w].epoch == epoch
                            and state.workers[w].stopped_ms is None for w in range(count)))
        await self.wait(ready, f"epoch {epoch} running on {count} workers")
        return result[0]

    async def assert_exact(self) -> None:
        """Outputs are exactly one per input, per key in order; the store holds the counts."""
        assert await self.outputs() == self.truth.expected_outputs()
        assert await self.store() == self.truth.expected_store()


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


def keys(count: int, prefix: str = "k") -> list[str]:
    return [f"{prefix}{n:03d}" for n in range(count)]


def placement(state: CoordinatorState) -> dict[str, tuple[list[list[Any]], int, int]]:
    """Task → (sorted SSPs, changelog partition, worker) of the state's model."""
    assert state.model is not None
    return {t.name: ([list(s) for s in sorted(t.ssps)], t.changelog_partition, t.worker)
            for t in state.model.ordered_tasks()}


async def _pad(system: System, stream: str, partition: int, records: int) -> dict[str, int]:
    written = {f"pad/{n:06d}": n for n in range(records)}
    rows = [ProducerRecord(stream, k.encode(), json.dumps(v).encode(), partition=partition)
            for k, v in written.items()]
    for start in range(0, len(rows), 10_000):
        await system.produce(rows[start:start + 10_000])
    return written
