"""Start, watch, restart and stop worker subprocesses (`sampan worker`).

Workers die with the coordinator (Linux parent-death signal → SIGTERM, so they still
commit and exit cleanly) and a crashed worker is restarted with exponential backoff
until it crashed more than ``max_restarts`` times within ``crash_window_s`` (a sliding
window: crashes spread over a long time never stop a job). A fenced worker (a newer job
model exists) is restarted without counting as a crash. A worker that exits
`EXIT_PERMANENT` (an error a restart cannot fix) is not restarted: `check` raises
`WorkerPermanentError` with its error line at once, and the owner stops the job.

Every worker logs to ``<log_dir>/worker-<id>.log``. By default (``tee``) its output also
stays on the coordinator's stderr; with ``tee=False`` (``sampan run --worker-logs DIR``)
it goes to the file only. Either way a crash names the file and its last error line.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from framework.errors import EXIT_FENCED, EXIT_PERMANENT, EXIT_STUCK, PermanentError, SampanError
from framework.logformat import NOTICES_GIVEN_ENV
from framework.metadata import StuckWorker, WorkerCrashes
from framework.wording import counted

__all__ = ["Supervisor", "WorkerCrashLoopError", "WorkerPermanentError", "describe_exit",
           "die_with_parent", "last_error_line"]

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0


class WorkerCrashLoopError(SampanError):
    """A worker kept crashing; the coordinator gives up instead of looping forever."""


class WorkerPermanentError(PermanentError):
    """A worker stopped on an error a restart cannot fix (exit `EXIT_PERMANENT`); the
    message is the worker's own error line."""


def _span(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


def describe_exit(code: int) -> str:
    """How a process ended, for people: ``exited with status 2``, ``killed by SIGKILL``
    (a negative status is the signal that killed it)."""
    if code >= 0:
        return f"exited with status {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


def last_error_line(path: Path, tail_bytes: int = 65536) -> str | None:
    """The last line of a worker log that reports an error, or None (missing file, none)."""
    try:
        with path.open("rb") as file:
            file.seek(max(0, path.stat().st_size - tail_bytes))
            lines = file.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if line.startswith("{"):  # --log-format json
            try:
                entry = json.loads(line)
            except ValueError:
                entry = None
            if isinstance(entry, dict) and entry.get("level") in ("ERROR", "CRITICAL"):
                return str(entry.get("message"))
            continue
        if line.startswith("sampan worker: error: "):
            return line.removeprefix("sampan worker: error: ")
        if " ERROR " in line or " CRITICAL " in line:
            return line.split(" ERROR ", 1)[-1].split(" CRITICAL ", 1)[-1]
    return None


def die_with_parent() -> None:
    """In a child before exec (``preexec_fn``): get SIGTERM when the process that started it
    dies — the coordinator, or a benchmark (Linux only; elsewhere nothing)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


@dataclass
class _Worker:
    worker_id: int
    process: asyncio.subprocess.Process
    started: float
    log_file: IO[bytes] | None
    prepared: bool = False
    waiter: asyncio.Task[int] | None = field(default=None, repr=False)


class Supervisor:
    """Owns the worker processes of one job."""

    def __init__(
        self,
        job_file: Path,
        *,
        log_dir: Path,
        tee: bool = True,
        config_snapshot: Path | None = None,
        stop_timeout_s: float = 10.0,
        restart_backoff_s: float = 0.5,
        max_restarts: int = 5,
        crash_window_s: float = 600.0,
        command: Callable[[int], list[str]] | None = None,
        on_exit: Callable[[], Awaitable[None]] | None = None,
        stop: asyncio.Event | None = None,
        restart_fenced: Callable[[int], Awaitable[bool]] | None = None,
    ) -> None:
        self.job_file = job_file
        self.log_dir = log_dir
        self.tee = tee
        self.config_snapshot = config_snapshot
        """The configuration workers run (`snapshot_config`), whatever the job file says now."""
        self.stop_timeout_s = stop_timeout_s
        self.restart_backoff_s = restart_backoff_s
        self.max_restarts = max_restarts
        self.crash_window_s = crash_window_s
        self.command = command
        """Worker id → the arguments after ``python -m`` (default: ``framework.cli worker``)."""
        self.stop_requested = stop or asyncio.Event()
        """Set when the job stops: a restart backoff in progress ends without a restart."""
        self.on_exit = on_exit
        """Called when a worker exited unexpectedly, before its restart backoff (to report
        it while it is down)."""
        self.restart_fenced = restart_fenced
        """Whether a worker that exited fenced is restarted now (default: always); one that
        is not is forgotten, for the owner to start again (a host does once it runs the
        model that fenced it: started earlier, it would run the old one)."""
        self._crashes: dict[int, collections.deque[float]] = {}  # worker → recent crash times
        self._reports: dict[int, WorkerCrashes] = {}
        self.stuck: StuckWorker | None = None
        """The last worker the task watchdog stopped: worker, detail, at_ms (for status)."""
        self.workers: dict[int, _Worker] = {}
        self.prepared: dict[int, _Worker] = {}
        """Worker processes started ahead (`prepare`), connected and waiting to be told to go."""
        self.restarts = 0
        self.fencings = 0
        """Workers that exited fenced by a newer job model (for metrics)."""
        self._stopping = False

    def log_path(self, worker_id: int) -> Path:
        """The file holding worker ``worker_id``'s log."""
        return self.log_dir / f"worker-{worker_id}.log"

    async def prepare(self, count: int) -> None:
        """Start workers 0..count-1 ahead: each imports, connects and waits (`start` tells
        it to go; `discard_prepared` or the coordinator's exit lets it end unused).

        Their start-up then overlaps what comes before `start` — the coordinator's lease
        and model at start, the old workers' stop and the new model at an expansion —
        instead of following it."""
        for worker_id in range(count):
            if worker_id not in self.prepared:
                self.prepared[worker_id] = await self._launch(worker_id, prepared=True)

    async def discard_prepared(self) -> None:
        """End every prepared worker unused. It has written nothing: SIGTERM ends it where
        it is (still importing, or waiting), without waiting for it to get ready."""
        prepared, self.prepared = self.prepared, {}
        for worker in prepared.values():
            if worker.process.stdin is not None:
                worker.process.stdin.close()
            if worker.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    worker.process.send_signal(signal.SIGTERM)
        for worker in prepared.values():
            assert worker.waiter is not None
            try:
                await asyncio.wait_for(asyncio.shield(worker.waiter), self.stop_timeout_s)
            except TimeoutError:
                worker.process.kill()
                await worker.waiter
            self._close_log(worker)

    async def _spawn(self, worker_id: int) -> None:
        worker = self.prepared.pop(worker_id, None)
        if worker is not None and not await self._tell_go(worker):
            await self._prepared_ended(worker)
            worker = None
        if worker is None:
            worker = await self._launch(worker_id, prepared=False)
        worker.started = time.monotonic()
        self.workers[worker_id] = worker
        log.info("started worker %d (pid %d%s)", worker_id, worker.process.pid,
                 ", prepared" if worker.prepared else "")

    @staticmethod
    async def _tell_go(worker: _Worker) -> bool:
        """Send a prepared worker its go; False when it is no longer there to take it."""
        stdin = worker.process.stdin
        if worker.process.returncode is not None or stdin is None:
            return False
        try:
            stdin.write(b"go\n")
            await stdin.drain()
            stdin.close()
        except (BrokenPipeError, ConnectionResetError):  # it died meanwhile
            return False
        return True

    async def _prepared_ended(self, worker: _Worker) -> None:
        """Say that a prepared worker ended before its go, how and why (its log's error
        line): the worker started in its place may fail the same way."""
        assert worker.waiter is not None
        try:
            code = await asyncio.wait_for(asyncio.shield(worker.waiter), self.stop_timeout_s)
        except TimeoutError:  # its stdin is closed: it is on its way out
            worker.process.kill()
            code = await worker.waiter
        self._close_log(worker)
        cause = last_error_line(self.log_path(worker.worker_id))
        log.warning("worker %d (started ahead) %s before it was told to go%s (log: %s); "
                    "starting it again", worker.worker_id, describe_exit(code),
                    f": {cause}" if cause else "", self.log_path(worker.worker_id))

    async def _launch(self, worker_id: int, *, prepared: bool) -> _Worker:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_file = None
        extra: list[str] = ["--wait-for-go"] if prepared else []
        if self.config_snapshot is not None:
            extra += ["--config-snapshot", str(self.config_snapshot)]
        if self.tee:
            extra += ["--log-file", str(self.log_path(worker_id))]
        else:
            log_file = open(self.log_path(worker_id), "ab")  # noqa: SIM115
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", *(self.command(worker_id) if self.command else [
                "framework.cli", "worker", str(self.job_file), "--worker", str(worker_id)]),
            *extra,
            stdin=asyncio.subprocess.PIPE if prepared else None,
            stdout=log_file, stderr=log_file,
            preexec_fn=die_with_parent if sys.platform.startswith("linux") else None,
            env={**os.environ, "PYTHONUNBUFFERED": "1", NOTICES_GIVEN_ENV: "1"},
        )
        worker = _Worker(worker_id, process, time.monotonic(), log_file, prepared=prepared)
        worker.waiter = asyncio.ensure_future(process.wait())
        return worker

    async def start(self, count: int, first: int = 0) -> None:
        """Start workers first..first+count-1."""
        await self.start_ids(range(first, first + count))

    async def start_ids(self, ids: Iterable[int]) -> None:
        """Start the workers ``ids`` (those not running)."""
        self._stopping = False
        for worker_id in ids:
            if worker_id not in self.workers:
                await self._spawn(worker_id)

    async def stop_ids(self, ids: Collection[int]) -> None:
        """Stop the workers ``ids`` as `stop` does; the others go on."""
        stopping = {w: self.workers.pop(w) for w in ids if w in self.workers}
        await self._stop(stopping.values())

    async def check(self) -> None:
        """Restart crashed workers; raise `WorkerCrashLoopError` when one keeps crashing."""
        if self._stopping:
            return
        for worker_id, worker in list(self.workers.items()):
            if worker.waiter is None or not worker.waiter.done():
                continue
            code = worker.waiter.result()
            self._close_log(worker)
            cause = last_error_line(self.log_path(worker_id)) if code not in (
                0, EXIT_FENCED) and code > 0 else None
            if code == EXIT_FENCED:
                log.warning("worker %d exited: fenced by a newer job model", worker_id)
            elif code == EXIT_PERMANENT:
                log.error("worker %d stopped on an error a restart cannot fix%s (log: %s); "
                          "stopping the job", worker_id, f": {cause}" if cause else "",
                          self.log_path(worker_id))
                self._note_crash(worker_id, code, cause, None)
                raise WorkerPermanentError(cause or (
                    f"worker {worker_id} stopped on an error a restart cannot fix (exit "
                    f"status {EXIT_PERMANENT}); its log {self.log_path(worker_id)} says why"))
            else:
                log.warning("worker %d %s%s (log: %s)", worker_id, describe_exit(code),
                            f": {cause}" if cause else "", self.log_path(worker_id))
            if code == EXIT_STUCK:
                self.stuck = StuckWorker(worker=worker_id, detail=cause,
                                         at_ms=int(time.time() * 1000))
            if code == EXIT_FENCED:
                self.fencings += 1
                crashes = 0
                if self.restart_fenced is not None and not await self.restart_fenced(
                        worker_id):
                    del self.workers[worker_id]
                    continue
            else:
                now = time.monotonic()
                recent = self._crashes.setdefault(worker_id, collections.deque())
                recent.append(now)
                while recent and recent[0] < now - self.crash_window_s:
                    recent.popleft()
                crashes = len(recent)
            last = f"status {code}" if code >= 0 else describe_exit(code)
            if crashes > self.max_restarts:
                self._note_crash(worker_id, code, cause, None)
                raise WorkerCrashLoopError(
                    f"worker {worker_id} exited {counted(crashes, 'time')} within "
                    f"{_span(self.crash_window_s)} (last {last})"
                    f"{f': {cause}' if cause else ''}; the worker's log is "
                    f"{self.log_path(worker_id)}; fix the cause and run again")
            delay = min(MAX_BACKOFF_S, self.restart_backoff_s * 2 ** (crashes - 1)) if (
                crashes) else 0.0
            log.info("restarting worker %d in %.1fs (%d of %d crashes allowed within %s)",
                     worker_id, delay, crashes, self.max_restarts, _span(self.crash_window_s))
            if crashes:
                self._note_crash(worker_id, code, cause, int((time.time() + delay) * 1000))
                if self.on_exit is not None:
                    await self.on_exit()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop_requested.wait(), delay)
                return  # stopping: no restart
            self.restarts += 1
            await self._spawn(worker_id)
            if worker_id in self._reports:
                report = self._reports[worker_id]
                report.restart_ms, report.restarted_ms = None, int(time.time() * 1000)

    def _note_crash(self, worker_id: int, code: int, cause: str | None,
                    restart_ms: int | None) -> None:
        """Keep the crash for `crash_reports`: its time, how it ended, its error line."""
        now_ms = int(time.time() * 1000)
        report = self._reports.setdefault(worker_id, WorkerCrashes(worker=worker_id))
        report.exits_ms.append(now_ms)
        report.last_exit, report.last_error, report.restart_ms = (
            describe_exit(code), cause, restart_ms)

    def crash_reports(self) -> list[WorkerCrashes]:
        """Workers that crashed within the crash window, with when and why (for status)."""
        oldest = int((time.time() - self.crash_window_s) * 1000)
        reports = []
        for _, report in sorted(self._reports.items()):
            report.exits_ms = [t for t in report.exits_ms if t >= oldest]
            if report.exits_ms or report.restart_ms is not None:
                reports.append(WorkerCrashes.from_dict(report.to_dict()))
        return reports

    async def stop(self) -> None:
        """SIGTERM every worker (finish batch, commit, exit); SIGKILL after the timeout."""
        self._stopping = True
        await self._stop(list(self.workers.values()))
        self.workers.clear()

    async def _stop(self, workers: Collection[_Worker]) -> None:
        for worker in workers:
            if worker.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    worker.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout_s
        for worker in workers:
            assert worker.waiter is not None
            try:
                await asyncio.wait_for(asyncio.shield(worker.waiter),
                                       max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                log.warning("worker %d did not stop within %.1fs; killing it",
                            worker.worker_id, self.stop_timeout_s)
                worker.process.kill()
                await worker.waiter
            self._close_log(worker)

    def pids(self) -> dict[int, int]:
        """Worker id → pid of the running workers."""
        return {w.worker_id: w.process.pid for w in self.workers.values()
                if w.process.returncode is None}

    @staticmethod
    def _close_log(worker: _Worker) -> None:
        if worker.log_file is not None and not worker.log_file.closed:
            worker.log_file.close()
