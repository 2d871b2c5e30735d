"""The curves' job: the per-key sum on N partitions run by W `sampan worker` processes.

A job folder holds the sum task and a job file; `prepare` creates its streams, publishes
its first job model (what `sampan run` does) and writes the input; `run_workers` starts
the worker processes, waits until every input record is committed and reports the
throughput (first worker resumed → all committed), the start-up (spawned → the last
worker resumed) and each worker's peak RSS.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.sum_task import sum_task_source
from framework.config import JobConfig, load_config
from framework.coordinator.builder import build_job_model
from framework.coordinator.supervisor import die_with_parent
from framework.drill.timeline import committed_and_end
from framework.metadata import publish_model, read_state
from framework.systems import open_system
from framework.systems.base import ProducerRecord, System

ROOT = Path(__file__).resolve().parents[2]



@dataclass(frozen=True)
class Run:
    """What one run of the job measured."""

    records: int
    seconds: float
    """First worker resumed → every input record committed."""
    startup: float
    """Workers spawned → the last of them resumed (stores opened, positions read)."""
    peak_rss_mib: list[float]

    @property
    def rate(self) -> float:
        return self.records / self.seconds


def write_job(folder: Path, *, name: str, system: str = "local", bootstrap: str | None = None,
              partitions: int = 4, workers: int = 1, extra: str = "") -> JobConfig:
    """The job folder (task + job file) of the sum job; returns its config."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sum_task.py").write_text(sum_task_source(
        'f"{envelope.ssp.system}.{envelope.ssp.stream}-sums"'))
    where = f'bootstrap = "{bootstrap}"' if system == "kafka" else 'path = "data"'
    (folder / "job.toml").write_text(f"""\
[job]
name = "{name}"
task = "sum_task:SumTask"
inputs = ["{system}.{name}-in"]
workers = {workers}
fetch_max_records = 5000
{extra}
[systems.{system}]
type = "{system}"
{where}

[streams."{system}.{name}-in"]
partitions = {partitions}

[streams."{system}.{name}-in-sums"]
partitions = {partitions}

[stores.totals]
""")
    return load_config(folder / "job.toml")


def records(config: JobConfig, count: int, keys: int) -> list[ProducerRecord]:
    """``count`` records ``{"amount": 1}`` over ``keys`` keys, round robin."""
    stream = config.inputs[0].partition(".")[2]
    return [ProducerRecord(stream, b"key-%08d" % (n % keys), b'{"amount":1}')
            for n in range(count)]


async def open_meta(config: JobConfig) -> System:
    system = open_system(config.system(config.metadata_system))
    await system.start()
    return system


async def prepare(config: JobConfig, partitions: int, inputs: Sequence[ProducerRecord]) -> None:
    """Create the job's streams, publish its first job model and write ``inputs``."""
    stream = config.inputs[0].partition(".")[2]
    system = await open_meta(config)
    try:
        await system.create_stream(stream, partitions, exist_ok=True)
        await system.create_stream(f"{stream}-sums", partitions, exist_ok=True)
        model = build_job_model(config, {config.inputs[0]: partitions}, None)
        changelog = config.changelog_stream("totals").partition(".")[2]
        await system.create_stream(changelog, model.changelog_partitions, compacted=True,
                                   exist_ok=True)
        await publish_model(system, config, model)
        for at in range(0, len(inputs), 20_000):
            await system.produce(inputs[at:at + 20_000])
    finally:
        await system.close()


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set size (the kernel's VmHWM), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def start_worker(config: JobConfig, worker: int, log: Path) -> subprocess.Popen[bytes]:
    """`sampan worker JOB --worker N` in its own session, its log in ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "framework.cli", "worker", str(config.path),
             "--worker", str(worker)], stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
            preexec_fn=die_with_parent)  # SIGTERM if the bench dies


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the worker (SIGKILL after 60 s) and reap it."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)


async def run_workers(config: JobConfig, count: int, timeout: float = 1800) -> Run:
    """Start the job's workers, wait until all ``count`` input records are committed."""
    logs = config.path.parent / "logs"
    logs.mkdir(exist_ok=True)
    spawned_ms = time.time() * 1000
    processes = [start_worker(config, n, logs / f"worker-{n}.log")
                 for n in range(config.workers)]
    system = await open_meta(config)
    try:
        deadline = time.monotonic() + timeout
        while True:
            committed, end = await committed_and_end(system, config)
            if committed >= end == count:
                finished_ms = time.time() * 1000
                break
            for process in processes:
                if process.poll() is not None:
                    raise RuntimeError(f"a worker exited with {process.returncode}: see {logs}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{committed:,} of {count:,} committed after {timeout} s")
            await asyncio.sleep(0.1)
        rss = [peak_rss_mib(p.pid) for p in processes]
        state = await read_state(system, config)
        resumed = [r.resumed_ms for r in state.workers.values() if r.resumed_ms]
        first_ms = min(resumed) if resumed else finished_ms
        last_ms = max(resumed) if resumed else finished_ms
        return Run(count, max(finished_ms - first_ms, 1.0) / 1000,
                   (last_ms - spawned_ms) / 1000, rss)
    finally:
        await system.close()
        for process in processes:
            stop(process)
