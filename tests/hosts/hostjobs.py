"""Helpers of the several-hosts tests: a sum job on Kafka, host processes, truth, state.

Every host is `sampan run JOB --host NAME --data-dir DIR` in its own session (process group)
with its own state folder; a test kills a host by killing its whole process group.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from jobs.harness import produce as produce_records
from jobs.outputs import Workload, outputs
from polling import poll

from framework.config import JobConfig, load_config
from framework.drill.hosts import settled
from framework.drill.hosts_job import HostProcesses, write_job
from framework.drill.verify import read_stream
from framework.metadata import CoordinatorState, first_state, read_state
from framework.systems import open_system
from framework.systems.base import ProducerRecord, System

HERE = Path(__file__).resolve().parent
T = TypeVar("T")


def job_file(folder: Path, bootstrap: str, name: str, *, partitions: int = 6,
             standbys: int = 0, extra: str = "",
             client_options: Mapping[str, Any] | None = None) -> Path:
    """The host drill's per-key sum job over ``kafka.<name>-in``, session timeout 6 s."""
    return write_job(folder, bootstrap, name, partitions=partitions, standbys=standbys,
                     session_timeout_ms=6000, extra=extra, client_options=client_options)


def outputs_job(folder: Path, bootstrap: str, name: str, *, tasks: int, workers: int = 2,
                task: str = "sum_task:SumTask", rebalances: str = "incremental",
                standbys: int = 0, session_timeout_ms: int = 10000,
                recovery_lag: int | None = None,
                client_options: Mapping[str, Any] | None = None) -> Path:
    """tests/jobs' per-key running sum (an output per record: its running sum and the
    key's record number ``n``) over ``kafka.<name>-in`` with ``tasks`` partitions,
    ``workers`` per host, the default recovery lag unless ``recovery_lag``; the task
    module is copied next to the job file."""
    path = write_job(folder, bootstrap, name, partitions=tasks, standbys=standbys,
                     session_timeout_ms=session_timeout_ms, client_options=client_options)
    shutil.copy(HERE.parent / "jobs" / "sum_task.py", folder / "sum_task.py")
    lag = "" if recovery_lag is None else f"acceptable_recovery_lag = {recovery_lag}\n"
    text = path.read_text().replace(
        'task = "framework.drill.sum_task:SumTask"', f'task = "{task}"').replace(
        "workers = 1\n", f"workers = {workers}\n").replace(
        "acceptable_recovery_lag = 0\n", f'rebalances = "{rebalances}"\n{lag}')
    path.write_text(text + f"""
[streams."kafka.{name}-in-sums"]
partitions = 4
key_serde = "string"
value_serde = "json"
""")
    return path


class SteadyInput:
    """Writes the workload's records, ``batch`` every 50 ms, until stopped (in a thread of
    its own)."""

    def __init__(self, config: JobConfig, work: Workload, batch: int = 40) -> None:
        self.config = config
        self.work = work
        self.batch = batch
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self.error: BaseException | None = None

    async def _run(self) -> None:
        system = open_system(self.config.system("kafka"))
        await system.start()
        try:
            while not self._stop.is_set():
                await system.produce(self.work.records(self.batch))
                await asyncio.sleep(0.05)
        except BaseException as error:  # reported by stop()
            self.error = error
        finally:
            await system.close()

    def __enter__(self) -> SteadyInput:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(60)
        assert self.error is None, f"the producer failed: {self.error!r}"


class Hosts(HostProcesses):
    """The host processes of one job (the host drill's), logs named ``<label>.log``."""

    def __init__(self, path: Path, root: Path) -> None:
        super().__init__(path, root, log_prefix="")

    @property
    def path(self) -> Path:
        return self.job

    @property
    def config(self) -> JobConfig:
        return load_config(self.job)

    def log(self, label: str) -> str:
        return self.log_path(label).read_text(errors="replace")

    def tails(self, chars: int = 3000) -> str:
        """The end of every host's log (each host's log has its workers' output too)."""
        return "\n".join(f"--- {n}:\n{self.log(n)[-chars:]}" for n in self.processes)

    @contextlib.contextmanager
    def logs_kept_on_failure(self, test: str) -> Iterator[None]:
        """On a failure, copy every host's full log to a kept folder and add the folder
        and the logs' ends to the failure message; stop every host in any case."""
        try:
            yield
        except Exception as error:
            kept = Path(tempfile.gettempdir()) / "sampan-failed-hosts" / (
                f"{test}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
            kept.mkdir(parents=True, exist_ok=True)
            for label in self.processes:
                shutil.copy(self.log_path(label), kept / f"{label}.log")
            (kept / "failure.txt").write_text(  # whole, where a runner's output is cut
                "".join(traceback.format_exception(error)))
            raise AssertionError(f"{error}\nhost logs kept in {kept}\n{self.tails(6000)}"
                                 ) from error
        finally:
            self.stop_all()

    def terminate(self, name: str) -> int:
        self.processes[name].send_signal(signal.SIGTERM)
        return self.processes[name].wait(60)


def wait_for(predicate: Callable[[], Any], timeout: float, what: str,
             hosts: Hosts | None = None) -> Any:
    """Poll ``predicate`` until truthy; fail naming ``what`` (with host logs) on timeout."""
    deadline = time.monotonic() + timeout
    started = time.monotonic()
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            tails = "" if hosts is None else hosts.tails()
            raise AssertionError(f"timed out waiting for {what}\n{tails}")
        poll(started)


def read_on(config: JobConfig, read: Callable[[System], Awaitable[T]]) -> T:
    """``read`` on the job's Kafka system, opened for it and closed after (a read or a
    write: this test's own, synchronous)."""
    async def run() -> T:
        system = open_system(config.system("kafka"))
        await system.start()
        try:
            return await read(system)
        finally:
            await system.close()
    return asyncio.run(run())


def write_records(config: JobConfig, work: Workload, count: int) -> None:
    """The workload's next ``count`` records, written to the job's input."""
    records = work.records(count)
    read_on(config, lambda system: produce_records(system, records))


def outputs_of(config: JobConfig) -> dict[str, list[dict[str, int]]]:
    """Every output of the tests/jobs sum job per key, in order."""
    return read_on(config, lambda system: outputs(system, config))


def every_output(config: JobConfig, work: Workload) -> bool:
    """Whether there is an output for every record written: distinct record numbers per
    key, as a replay repeats outputs (counting those let a wait end before the last
    records were processed)."""
    found = outputs_of(config)
    return all(len({o["n"] for o in found.get(key, [])}) >= len(amounts)
               for key, amounts in work.amounts.items())


def state(config: JobConfig) -> CoordinatorState:
    return read_on(config, lambda meta: read_state(meta, config))


def first_settled(config: JobConfig, names: set[str], after: int = 0,
                  also: Callable[[CoordinatorState], object] = bool
                  ) -> CoordinatorState | None:
    """The job's state at the first moment it was `settled` on hosts ``names`` after epoch
    ``after`` (and ``also`` held), replayed from the coordinator stream: what a reader
    polling at once would have seen, even when a later model (a probing rebalance) has
    replaced it since; None before that moment came."""
    def wanted(current: CoordinatorState) -> bool:
        return settled(current, names, after) is not None and bool(also(current))
    return read_on(config, lambda meta: first_state(meta, config, wanted))


def produce(config: JobConfig, truth: Counter[str], count: int, keys: int, start: int = 0
            ) -> None:
    """``count`` records over ``keys`` keys, amount = record number % 7 + 1."""
    batch = []
    for n in range(start, start + count):
        key = f"k{n % keys:04d}"
        amount = n % 7 + 1
        truth[key] += amount
        batch.append(ProducerRecord(config.inputs[0].split(".", 1)[1], key.encode(),
                                    str(amount).encode()))
    read_on(config, lambda system: system.produce(batch))


def final_state(config: JobConfig) -> dict[str, int]:
    """Key → its last value in the ``totals`` changelog (what a full restore would give)."""
    async def read(system: System) -> dict[str, int]:
        latest: dict[str, int] = {}
        for rows in (await read_stream(system, config.changelog_ref("totals").stream)).values():
            for key, value in rows:
                if value is not None:
                    latest[key.decode()] = int(value)
        return latest
    return read_on(config, read)


def checkpointed(config: JobConfig) -> dict[str, dict[Any, int]]:
    """Task → input SSP → checkpointed position."""
    async def read(system: System) -> dict[str, dict[Any, int]]:
        return {t: dict(c.inputs) for t, c in
                (await system.read_checkpoints(config.name)).items()}
    return read_on(config, read)
