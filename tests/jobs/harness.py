"""Helpers of the worker end-to-end tests: the sum job's files, workload, runs and checks."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO

from polling import apoll

from framework.config import JobConfig, load_config
from framework.coordinator.builder import build_job_model
from framework.drill.verify import read_stream
from framework.jobmodel import JobModel
from framework.metadata import publish_model, read_state
from framework.systems import open_system
from framework.systems.base import ProducerRecord, System
from framework.worker.runner import Worker, WorkerResult

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PARTITIONS = 4


def write_job(
    folder: Path,
    *,
    name: str = "sums",
    system: str = "local",
    bootstrap: str | None = None,
    events: str = "events",
    task: str = "sum_task:SumTask",
    errors: str = "",
    job_extra: str = "",
) -> Path:
    """A job folder with the sum task and its job file; returns the job file."""
    folder.mkdir(parents=True, exist_ok=True)
    for module in HERE.glob("*_task.py"):
        shutil.copy(module, folder / module.name)
    where = f'bootstrap = "{bootstrap}"' if system == "kafka" else 'path = "data"'
    path = folder / "job.toml"
    path.write_text(f"""\
[job]
name = "{name}"
task = "{task}"
inputs = ["{system}.{events}"]
commit_interval_ms = 100
fetch_max_records = 2000
{job_extra}
[systems.{system}]
type = "{'kafka' if system == 'kafka' else 'local'}"
{where}

[streams."{system}.{events}"]
partitions = {PARTITIONS}

[streams."{system}.{events}-sums"]
partitions = {PARTITIONS}

[streams."{system}.dead-letters"]

[stores.totals]
{errors}""")
    return path


@dataclass
class Workload:
    """Seeded records ``{"amount": a, "n": i}`` (i = the key's i-th record) and their truth."""

    keys: int
    seed: int = 7
    stream: str = "events"
    key_prefix: str = "key"
    amounts: dict[str, list[int]] = field(default_factory=dict)

    def records(self, count: int) -> list[ProducerRecord]:
        rng = random.Random(f"{self.seed}-{sum(map(len, self.amounts.values()))}")
        batch = []
        for _ in range(count):
            key = f"{self.key_prefix}-{rng.randrange(self.keys):05d}"
            amount = rng.randint(1, 9)
            seen = self.amounts.setdefault(key, [])
            seen.append(amount)
            value = json.dumps({"amount": amount, "n": len(seen)}).encode()
            batch.append(ProducerRecord(self.stream, key.encode(), value))
        return batch

    @property
    def totals(self) -> dict[str, int]:
        return {key: sum(amounts) for key, amounts in self.amounts.items()}

    @property
    def count(self) -> int:
        return sum(map(len, self.amounts.values()))


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


def streams(config: JobConfig) -> tuple[str, str]:
    """The job's input stream and its output stream (names inside the system)."""
    events = config.inputs[0].partition(".")[2]
    return events, f"{events}-sums"


async def prepare(config: JobConfig, system: System) -> JobModel:
    """Create the job's streams and publish its first job model (what `sampan run` does)."""
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


async def output_count(system: System, config: JobConfig) -> int:
    """How many records the sums stream holds."""
    return sum(r.end for r in (await system.offsets(streams(config)[1])).values())


async def outputs(system: System, config: JobConfig) -> dict[str, list[dict[str, int]]]:
    """Every output per key, in order."""
    found: dict[str, list[dict[str, int]]] = {}
    for rows in (await read_stream(system, streams(config)[1])).values():
        for key, value in rows:
            found.setdefault(key.decode(), []).append(json.loads(value))
    return found


async def changelog_state(system: System, config: JobConfig) -> dict[str, int]:
    """The store's contents as its changelog tells them (latest record per key)."""
    stream = config.changelog_stream("totals").partition(".")[2]
    state: dict[str, int] = {}
    for rows in (await read_stream(system, stream)).values():
        for key, value in rows:
            state[key.decode()] = json.loads(value)
    return state


async def changelog_ends(system: System, config: JobConfig) -> dict[int, int]:
    """End offset of every changelog partition."""
    stream = config.changelog_stream("totals").partition(".")[2]
    return {p: r.end for p, r in (await system.offsets(stream)).items()}


def exact_problems(found: dict[str, list[dict[str, int]]], work: Workload) -> list[str]:
    """Every key's outputs must be its running sums, one per input record, in order."""
    problems = []
    for key, amounts in sorted(work.amounts.items()):
        want, running = [], 0
        for n, amount in enumerate(amounts, 1):
            running += amount
            want.append({"sum": running, "n": n})
        got = found.get(key, [])
        if got != want:
            first = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
                         min(len(got), len(want)))
            problems.append(f"{key}: {len(got)} outputs, expected {len(want)}; first "
                            f"difference at output {first}")
    problems += [f"{key}: outputs for a key never produced" for key in found
                 if key not in work.amounts]
    return problems


async def wait_until(condition: Callable[[], Awaitable[bool]], timeout: float, what: str,
                     process: subprocess.Popen[bytes] | None = None) -> None:
    """Poll ``condition`` until true; fail naming ``what`` on timeout or an early exit."""
    deadline = time.monotonic() + timeout
    started = time.monotonic()
    while not await condition():
        if process is not None and process.poll() is not None:
            raise AssertionError(f"worker exited with {process.returncode} while waiting "
                                 f"for {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await apoll(started)


async def wait_resumed(system: System, config: JobConfig, process: subprocess.Popen[bytes],
                       worker: int = 0, timeout: float = 30) -> None:
    """Wait until ``process`` (worker ``worker``) reported its tasks running."""
    async def resumed() -> bool:
        report = (await read_state(system, config)).workers.get(worker)
        return report is not None and report.resumed_ms is not None

    await wait_until(resumed, timeout, f"worker {worker}'s start report", process)


def start_worker(path: Path, log: IO[bytes], worker: int = 0) -> subprocess.Popen[bytes]:
    """`sampan worker JOB --worker N` as a subprocess in its own session."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "framework.cli", "worker", str(path), "--worker", str(worker)],
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


def load(path: Path) -> JobConfig:
    """The job's config."""
    return load_config(path)


def replay_problems(found: dict[str, list[dict[str, int]]], work: Workload) -> list[str]:
    """At-least-once after a crash: outputs may repeat, but only as a replay of outputs
    already emitted (same record number, same sum); every record's output is there and
    the first time each appears, in order with its running sum."""
    problems = []
    for key, amounts in sorted(work.amounts.items()):
        sums = [sum(amounts[:n]) for n in range(1, len(amounts) + 1)]
        first: dict[int, int] = {}
        for output in found.get(key, []):
            n, total = output["n"], output["sum"]
            if n in first:
                if first[n] != total:
                    problems.append(f"{key}: replayed output {n} has sum {total}, first "
                                    f"{first[n]}")
            elif n != len(first) + 1 or total != sums[n - 1]:
                problems.append(f"{key}: output {output} where record {len(first) + 1} "
                                f"(sum {sums[len(first)] if len(first) < len(sums) else '-'}) "
                                "was due")
                break
            else:
                first[n] = total
        if len(first) != len(amounts):
            problems.append(f"{key}: {len(first)} of {len(amounts)} records have an output")
    return problems


async def stamped_job(folder: Path, prefix: str, system: str, bootstrap: str | None
                      ) -> tuple[JobConfig, System, Workload]:
    """A fresh sum job with stamped outputs (`StampedSumTask`) on ``system``, its metadata
    system opened, and the workload of its input."""
    name = f"{prefix}-{system}-{int(time.time() * 1000)}"
    config = load(write_job(folder, name=name, system=system, bootstrap=bootstrap,
                            events=name, task="sum_task:StampedSumTask"))
    return config, await open_meta(config), Workload(keys=40, stream=name)


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
