"""Helpers of the windowing end-to-end tests: jobs run by `sampan run` subprocesses on the
local log on disk (`LocalJob`), the windowed_counts example among them (`WindowJob`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO, Any

from polling import apoll

from framework.config import JobConfig, load_config
from framework.drill.scenario import load_sibling
from framework.drill.verify import read_stream, store_state
from framework.metadata import CoordinatorState, read_state
from framework.systems import open_system
from framework.systems.base import ProducerRecord, System
from framework.windows.watermarks import marker_keys

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "windowed_counts"
MINUTE = 60_000
END_OF_TIME = 10**15
checker = load_sibling(str(EXAMPLE / "drill.py"), "checker")


def view(user: str, ts: int) -> ProducerRecord:
    return ProducerRecord("page-views", user.encode(),
                          json.dumps({"user": user, "ts": ts}).encode(), timestamp=ts)


def watermark_round(watermark: int, final_partitions: int) -> list[ProducerRecord]:
    """``{"watermark": T}`` under one marker key per partition of the final count."""
    return [ProducerRecord("page-views", key.encode(),
                           json.dumps({"watermark": watermark}).encode(), timestamp=watermark)
            for key in marker_keys("page-views", final_partitions)]


class LocalJob:
    """A job in a folder of its own on the local log on disk, run by `sampan run`:
    ``files`` (name → text) are written next to the job file ``job`` (its text). Its
    streams are those of the job's system ``system`` (e.g. ``"kafka"`` on a broker)."""

    def __init__(self, folder: Path, job: str, files: dict[str, str], *,
                 system: str = "local") -> None:
        self.system = system
        folder.mkdir(parents=True)
        for name, text in files.items():
            (folder / name).write_text(text)
        (folder / "job.toml").write_text(job)
        self.folder = folder
        self.path = folder / "job.toml"
        self.config: JobConfig = load_config(self.path)
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def stores_dir(self) -> Path:
        """Where the job's RocksDB stores live (``<state_dir>/stores``)."""
        return Path(self.config.state_dir) / "stores"

    # -- the log on disk --------------------------------------------------------------------
    async def call(self, fn: Callable[[System], Awaitable[Any]]) -> Any:
        system = open_system(self.config.system(self.system))
        await system.start()
        try:
            return await fn(system)
        finally:
            await system.close()

    async def create(self, streams: dict[str, int]) -> None:
        async def create(system: System) -> None:
            for stream, partitions in streams.items():
                await system.create_stream(stream, partitions)
        await self.call(create)

    async def send(self, records: list[ProducerRecord]) -> None:
        await self.call(lambda s: s.produce(records))

    async def expand_stream(self, stream: str, partitions: int) -> None:
        await self.call(lambda s: s.expand_stream(stream, partitions))

    async def state(self) -> CoordinatorState:
        return await self.call(lambda s: read_state(s, self.config))  # type: ignore[no-any-return]

    async def values(self, stream: str) -> list[dict[str, Any]]:
        """Every record of ``stream`` (all partitions, each in offset order), decoded."""
        rows = await self.call(lambda s: read_stream(s, stream))
        return [json.loads(value) for part in rows.values() for _, value in part]

    async def keyed_values(self, stream: str) -> list[tuple[str, dict[str, Any]]]:
        rows = await self.call(lambda s: read_stream(s, stream))
        return [(key.decode(), json.loads(value)) for part in rows.values()
                for key, value in part]

    async def store_keys(self, store: str) -> list[str]:
        """The keys the store holds at the end, per its changelog."""
        state = await self.call(lambda s: store_state(s, self.config, store))
        return [key for contents in state.values() for key in contents]

    async def caught_up_on(self, *streams: str) -> bool:
        """Every record of ``streams`` processed and committed."""
        async def check(system: System) -> bool:
            checkpoints = await system.read_checkpoints(self.config.name)
            for stream in streams:
                ends = {p: r.end for p, r in (await system.offsets(stream)).items()}
                done: dict[int, int] = {}
                for checkpoint in checkpoints.values():
                    for ssp, offset in checkpoint.inputs.items():
                        if ssp.stream == stream:
                            done[ssp.partition] = offset
                if not all(done.get(p, 0) >= end for p, end in ends.items()):
                    return False
            return True
        return bool(await self.call(check))

    def sampan(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """A one-shot `sampan` command with ``--job`` this job's file."""
        return subprocess.run([sys.executable, "-m", "framework.cli", *args, "--job",
                               str(self.path)], input=stdin, capture_output=True, text=True,
                              timeout=120, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})

    async def kill_worker(self, worker: int) -> int:
        """SIGKILL one worker process (the coordinator restarts it); its pid."""
        pid = (await self.state()).status.worker_pids[worker]
        os.kill(pid, signal.SIGKILL)
        return pid

    # -- processes --------------------------------------------------------------------------
    def start(self) -> None:
        """`sampan run JOB` in its own session (so the test can kill it with its workers)."""
        self._log = open(self.folder / "coordinator.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-m", "framework.cli", "run", str(self.path), "--worker-logs",
             str(self.folder / "logs")], stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})

    def kill(self) -> None:
        """SIGKILL the coordinator and its workers (the whole process group)."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)
        if self._log is not None:
            self._log.close()
            self._log = None

    async def stop(self, timeout: float = 60) -> int:
        """SIGINT (Ctrl-C) and wait for a clean exit."""
        assert self.process is not None
        self.process.send_signal(signal.SIGINT)
        deadline = time.monotonic() + timeout
        while self.process.poll() is None:
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"sampan run ignored SIGINT for {timeout:g}s")
            await asyncio.sleep(0.05)
        self.kill()
        return self.process.returncode

    def logs(self) -> str:
        files = [self.folder / "coordinator.log", *sorted((self.folder / "logs").glob("*"))]
        return "\n".join(f.read_text(errors="replace")[-2000:] for f in files if f.exists())

    async def wait(self, condition: Callable[[], Awaitable[bool]], what: str,
                   timeout: float = 120) -> None:
        """Poll ``condition``; fail naming ``what`` on timeout or when `sampan run` exited."""
        deadline = time.monotonic() + timeout
        started = time.monotonic()
        while not await condition():
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"sampan run exited with {self.process.returncode} "
                                     f"while waiting for {what}:\n{self.logs()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:g}s waiting for {what}:\n"
                                     f"{self.logs()}")
            await apoll(started)

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

    async def wait_epoch(self, epoch: int, workers: int) -> CoordinatorState:
        """Until ``epoch`` runs on every worker."""
        found: list[CoordinatorState] = []

        async def ready() -> bool:
            state = await self.state()
            found[:] = [state]
            return (state.model is not None and state.model.epoch == epoch
                    and all(w in state.workers and state.workers[w].epoch == epoch
                            and state.workers[w].stopped_ms is None for w in range(workers)))
        await self.wait(ready, f"epoch {epoch} running on {workers} workers")
        return found[0]


class WindowJob(LocalJob):
    """The windowed_counts example as a job: its files, workload and truth."""

    def __init__(self, folder: Path, *, workers: int, partitions: int) -> None:
        text = (EXAMPLE / "job.toml").read_text()
        text = text.replace("workers = 2", f"workers = {workers}")
        text = text.replace("commit_interval_ms = 500", "commit_interval_ms = 100")
        text = text.replace("monitor_interval_ms = 1000", "monitor_interval_ms = 300")
        text = text.replace('[streams."local.page-views"]\npartitions = 2',
                            f'[streams."local.page-views"]\npartitions = {partitions}')
        super().__init__(folder, text, {module.name: module.read_text()
                                        for module in EXAMPLE.glob("*.py")})
        self.partitions = partitions
        self.views: list[dict[str, Any]] = []

    async def create_streams(self) -> None:
        await self.create({"page-views": self.partitions, "views-per-user": 4,
                           "late-views": 1})

    async def produce(self, records: list[ProducerRecord]) -> None:
        self.views += [v for v in (json.loads(r.value or b"{}") for r in records) if "ts" in v]
        await self.send(records)

    async def expand(self, partitions: int) -> None:
        await self.expand_stream("page-views", partitions)

    async def emitted(self) -> list[dict[str, Any]]:
        return await self.values("views-per-user")

    async def late(self) -> int:
        return len(await self.values("late-views"))

    async def open_windows(self) -> list[str]:
        """Window state left in the store, per its changelog (empty once all closed)."""
        return [key for key in await self.store_keys("views") if key.startswith(("k|", "c|"))]

    async def caught_up(self) -> bool:
        """Every record of page-views processed and committed."""
        return await self.caught_up_on("page-views")

    def expected(self) -> dict[tuple[str, int], int]:
        size, advance = 5 * MINUTE, MINUTE
        return checker.expected(self.views, size, advance)  # type: ignore[no-any-return]

    async def problems(self) -> list[str]:
        """Each expected window emitted exactly once with its count; nothing else."""
        emitted = await self.emitted()
        copies = Counter((w["user"], w["start"]) for w in emitted)
        got = {(w["user"], w["start"]): w["views"] for w in emitted}
        found = [f"{key} emitted {n} times" for key, n in sorted(copies.items()) if n > 1]
        want = self.expected()
        for key in sorted(set(want) | set(got)):
            if want.get(key) != got.get(key):
                found.append(f"window {key}: emitted {got.get(key)}, expected {want.get(key)}")
        return found
