"""Start, watch, restart and stop worker subprocesses (`sampan worker`).

Workers die with the coordinator (Linux parent-death signal → SIGTERM, so they still
commit and exit cleanly) and a crashed worker is restarted with exponential backoff
until it crashes ``max_restarts`` times in a row without making progress.

Every worker logs to ``<log_dir>/worker-<id>.log``. By default (``tee``) its output also
stays on the coordinator's stderr; with ``tee=False`` (``sampan run --worker-logs DIR``)
it goes to the file only. Either way a crash names the file and its last error line.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from framework.errors import SampanError
from framework.worker.main import EXIT_FENCED

__all__ = ["Supervisor", "WorkerCrashLoopError", "last_error_line"]

log = logging.getLogger(__name__)

HEALTHY_AFTER_S = 30.0  # a worker that ran this long resets its crash count


class WorkerCrashLoopError(SampanError):
    """A worker kept crashing; the coordinator gives up instead of looping forever."""


def last_error_line(path: Path, tail_bytes: int = 65536) -> str | None:
    """The last line of a worker log that reports an error, or None (missing file, none)."""
    try:
        with path.open("rb") as file:
            file.seek(max(0, path.stat().st_size - tail_bytes))
            lines = file.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if line.startswith("sampan worker: error: "):
            return line.removeprefix("sampan worker: error: ")
        if " ERROR " in line or " CRITICAL " in line:
            return line.split(" ERROR ", 1)[-1].split(" CRITICAL ", 1)[-1]
    return None


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM when the coordinator dies (Linux only)."""
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
    crashes: int = 0
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
    ) -> None:
        self.job_file = job_file
        self.log_dir = log_dir
        self.tee = tee
        self.config_snapshot = config_snapshot
        """The configuration workers run (`snapshot_config`), whatever the job file says now."""
        self.stop_timeout_s = stop_timeout_s
        self.restart_backoff_s = restart_backoff_s
        self.max_restarts = max_restarts
        self.workers: dict[int, _Worker] = {}
        self.restarts = 0
        self._stopping = False

    def log_path(self, worker_id: int) -> Path:
        """The file holding worker ``worker_id``'s log."""
        return self.log_dir / f"worker-{worker_id}.log"

    async def _spawn(self, worker_id: int, crashes: int = 0) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_file = None
        extra: list[str] = []
        if self.config_snapshot is not None:
            extra += ["--config-snapshot", str(self.config_snapshot)]
        if self.tee:
            extra += ["--log-file", str(self.log_path(worker_id))]
        else:
            log_file = open(self.log_path(worker_id), "ab")  # noqa: SIM115
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "framework.cli", "worker", str(self.job_file),
            "--worker", str(worker_id), *extra,
            stdout=log_file, stderr=log_file,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        worker = _Worker(worker_id, process, time.monotonic(), log_file, crashes)
        worker.waiter = asyncio.ensure_future(process.wait())
        self.workers[worker_id] = worker
        log.info("started worker %d (pid %d)", worker_id, process.pid)

    async def start(self, count: int) -> None:
        """Start workers 0..count-1."""
        self._stopping = False
        for worker_id in range(count):
            await self._spawn(worker_id)

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
            else:
                log.warning("worker %d exited with status %d%s (log: %s)", worker_id, code,
                            f": {cause}" if cause else "", self.log_path(worker_id))
            ran = time.monotonic() - worker.started
            crashes = 1 if ran >= HEALTHY_AFTER_S else worker.crashes + 1
            if crashes > self.max_restarts:
                raise WorkerCrashLoopError(
                    f"worker {worker_id} exited {crashes} times in a row (last status {code})"
                    f"{f': {cause}' if cause else ''}; the worker's log is "
                    f"{self.log_path(worker_id)}; fix the cause and run again")
            delay = self.restart_backoff_s * 2 ** (crashes - 1)
            log.info("restarting worker %d in %.1fs (crash %d of %d allowed)", worker_id,
                     delay, crashes, self.max_restarts)
            await asyncio.sleep(delay)
            self.restarts += 1
            await self._spawn(worker_id, crashes)

    async def stop(self) -> None:
        """SIGTERM every worker (finish batch, commit, exit); SIGKILL after the timeout."""
        self._stopping = True
        for worker in self.workers.values():
            if worker.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    worker.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout_s
        for worker in self.workers.values():
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
        self.workers.clear()

    def pids(self) -> dict[int, int]:
        """Worker id → pid of the running workers."""
        return {w.worker_id: w.process.pid for w in self.workers.values()
                if w.process.returncode is None}

    @staticmethod
    def _close_log(worker: _Worker) -> None:
        if worker.log_file is not None and not worker.log_file.closed:
            worker.log_file.close()
