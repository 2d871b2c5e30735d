"""The sum job as a `sampan run` subprocess on Kafka, for fault tests: start it, SIGKILL
its coordinator or one of its workers, read its status, check every output record.

A `SumRun` is a folder with the per-key sum task and a job file (`harness.write_job`) whose
names are its own, so tests share a broker. Workers log to ``<folder>/logs``, the
coordinator to ``<folder>/run.log``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO, Any

from jobs import harness as h
from polling import apoll

from framework.config import JobConfig
from framework.systems.base import System

CLI = [sys.executable, "-m", "framework.cli"]


class SumRun:
    """One sum job on Kafka run by `sampan run` (the coordinator and its workers)."""

    def __init__(self, folder: Path, bootstrap: str, *, guarantee: str = "exactly-once",
                 workers: int = 2, timeout_s: float = 10.0, coordinator: str = "",
                 client_options: str = "", job_extra: str = "") -> None:
        unique = uuid.uuid4().hex[:8]
        self.folder = folder
        self.path = h.write_job(
            folder, name=f"run-{unique}", system="kafka", bootstrap=bootstrap,
            events=f"events-{unique}",
            job_extra=f'guarantee = "{guarantee}"\nworkers = {workers}\n{job_extra}')
        text = self.path.read_text()
        line = f'bootstrap = "{bootstrap}"\n'
        options = f"timeout_s = {timeout_s}{', ' + client_options if client_options else ''}"
        text = text.replace(line, f"{line}client_options = {{ {options} }}\n")
        self.path.write_text(text + "\n[coordinator]\nmonitor_interval_ms = 300\n"
                             "worker_restart_backoff_ms = 100\n" + coordinator)
        self.config: JobConfig = h.load(self.path)
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.runs = 0

    @property
    def logs(self) -> Path:
        return self.folder / "logs"

    def start(self) -> subprocess.Popen[bytes]:
        """`sampan run JOB --worker-logs logs` in a session of its own."""
        self._close_log()
        self.runs += 1
        self._log = (self.folder / "run.log").open("ab")
        self._log.write(f"=== sampan run #{self.runs} ===\n".encode())
        self._log.flush()
        self.process = subprocess.Popen(
            [*CLI, "run", str(self.path), "--worker-logs", str(self.logs)],
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True, cwd=h.REPO,
            env={**os.environ, "PYTHONPATH": str(h.REPO)})
        return self.process

    def status(self) -> tuple[int, dict[str, Any]]:
        """`sampan status --json`: its exit status and document ({} when unreadable)."""
        done = subprocess.run([*CLI, "status", str(self.path), "--json"], capture_output=True,
                              text=True, timeout=120, cwd=h.REPO)
        try:
            return done.returncode, json.loads(done.stdout)
        except ValueError:
            return done.returncode, {}

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

    def kill_coordinator(self) -> None:
        """SIGKILL the coordinator process only (its workers get SIGTERM from the kernel)."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    async def stop(self, timeout: float = 120) -> int:
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
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)
        for pid in _session_pids(self.process.pid if self.process else None):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def run_log(self) -> str:
        path = self.folder / "run.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def logs_text(self, tail: int = 3000) -> str:
        """The coordinator's log and every worker's (their tails), for failure messages."""
        parts = [self.folder / "run.log", *sorted(self.logs.glob("worker-*.log"))]
        return "\n".join(f"--- {p.name}:\n{p.read_text(errors='replace')[-tail:]}"
                         for p in parts if p.exists())

    async def wait(self, condition: Callable[[], Awaitable[bool]], timeout: float,
                   what: str, *, running: bool = True) -> None:
        """Poll ``condition`` until true; fail naming ``what`` (with the logs) on timeout, or
        when ``running`` and `sampan run` exited."""
        deadline = time.monotonic() + timeout
        started = time.monotonic()
        while not await condition():
            if running and self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"sampan run exited {self.process.returncode} while "
                                     f"waiting for {what}\n{self.logs_text()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:g}s waiting for {what}\n"
                                     f"{self.logs_text()}")
            await apoll(started)


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


def _session_pids(session: int | None) -> list[int]:
    """Processes still in ``session`` (workers whose coordinator was killed alone)."""
    if session is None:
        return []
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            if int(_stat_fields(entry.name)[3]) == session:
                found.append(int(entry.name))
    return found


async def checkpointed(system: System, config: JobConfig) -> int:
    """Input records covered by the tasks' committed checkpoints."""
    checkpoints = await system.read_checkpoints(config.name)
    return sum(sum(c.inputs.values()) for c in checkpoints.values())


async def exact_outputs(system: System, config: JobConfig, work: h.Workload) -> list[str]:
    """Every output record checked: one per input, in order per key (`exact_problems`),
    and the store's changelog holding the true totals; [] when all is right."""
    problems = h.exact_problems(await h.outputs(system, config), work)
    state = await h.changelog_state(system, config)
    if state != work.totals:
        wrong = sorted(k for k in {*state, *work.totals} if state.get(k) != work.totals.get(k))
        problems.append(f"changelog totals differ for {len(wrong)} keys, e.g. {wrong[:3]}")
    return problems
