"""One peer process: started, stopped, and accounted by the kernel.

A peer prints one line ``PEER-REPORT {json}`` on stdout when it stops (records
processed; wall-clock and process CPU seconds at its first record, at the middle record
of a run with a count, and when it had committed and closed; the error that stopped it,
if any). The harness adds what only the
kernel knows: total CPU and peak RSS of the process (``wait4``'s rusage), and its exit
status.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["REPORT_PREFIX", "PeerProcess", "PeerResult", "report_line"]

REPORT_PREFIX = "PEER-REPORT "
TAIL_CHARS = 3000


def report_line(report: Mapping[str, Any]) -> str:
    """The line a peer prints when it stops."""
    return REPORT_PREFIX + json.dumps(dict(report))


@dataclass(frozen=True)
class PeerResult:
    """A finished peer process: its own report (None if it printed none) and rusage."""

    spawned_s: float
    exit_code: int
    report: dict[str, Any] | None
    cpu_total_s: float
    peak_rss_mib: float
    log_tail: str

    @property
    def records(self) -> int:
        return int(self.report["records"]) if self.report else 0

    @property
    def error(self) -> str | None:
        """The peer's own error, else a nonzero exit with its log tail, else None."""
        if self.report and self.report.get("error"):
            return str(self.report["error"])
        if self.exit_code != 0:
            how = (f"killed by signal {-self.exit_code}" if self.exit_code < 0
                   else f"exit code {self.exit_code}")
            last = [line for line in self.log_tail.splitlines() if line.strip()][-3:]
            return f"{how}: {' | '.join(last)}"
        return None

    def seconds(self, mark: str) -> float:
        """Wall-clock seconds from the spawn to ``mark`` (``first_s`` or ``done_s``)."""
        assert self.report is not None
        return float(self.report[mark]) - self.spawned_s

    def rate(self, since: str = "first") -> float:
        """Records/s from the first record (``since="mid"``: from the middle one, the
        second half alone, past warm-up) until committed and closed."""
        assert self.report is not None
        records = self.records if since == "first" else self.records - self.records // 2
        return records / (float(self.report["done_s"]) - float(self.report[f"{since}_s"]))

    def cpu_us_per_record(self, since: str = "first") -> float:
        """Process CPU (all threads: JIT and GC included) from the first record (or the
        middle one) until closed, per record."""
        assert self.report is not None
        records = self.records if since == "first" else self.records - self.records // 2
        cpu = float(self.report["cpu_done_s"]) - float(self.report[f"cpu_{since}_s"])
        return cpu * 1e6 / records


class PeerProcess:
    """A running peer: `wait` for it to stop by itself, or `stop` it with SIGTERM."""

    def __init__(self, command: Sequence[str], log_path: Path, *, cwd: Path | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        self.command = list(command)
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.spawned_s = time.time()
        self.process = subprocess.Popen(
            self.command, cwd=cwd, env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True)
        self.result: PeerResult | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def poll(self) -> PeerResult | None:
        """The result once the process has exited (reaped here, with its rusage)."""
        if self.result is None:
            self._reap(os.WNOHANG)
        return self.result

    def wait(self, timeout_s: float) -> PeerResult:
        """Wait for it to exit by itself; SIGKILL (and raise) after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while self.poll() is None:
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"{self.command[0]} did not finish within {timeout_s:g}s;"
                                   f" killed. Log {self.log_path}:\n{self.tail()}")
            time.sleep(0.05)
        assert self.result is not None
        return self.result

    def stop(self, timeout_s: float = 120.0) -> PeerResult:
        """SIGTERM (a clean stop: commit and close), SIGKILL after ``timeout_s``."""
        if self.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout_s
            while self.poll() is None:
                if time.monotonic() > deadline:
                    self.kill()
                    break
                time.sleep(0.05)
        assert self.result is not None
        return self.result

    def kill(self) -> None:
        """SIGKILL the peer's whole process group (a JVM or a sampan run and its workers)."""
        if self.result is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            self._reap(0)

    def tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-TAIL_CHARS:]
        except OSError as error:
            return f"<log unreadable: {error}>"

    def _reap(self, flags: int) -> None:
        pid, status, usage = os.wait4(self.pid, flags)
        if pid == 0:
            return
        self.process.returncode = os.waitstatus_to_exitcode(status)
        self._log.close()
        text = self.log_path.read_text(errors="replace")
        report = None
        for line in reversed(text.splitlines()):
            if line.startswith(REPORT_PREFIX):
                report = json.loads(line[len(REPORT_PREFIX):])
                break
        self.result = PeerResult(
            spawned_s=self.spawned_s, exit_code=self.process.returncode, report=report,
            cpu_total_s=usage.ru_utime + usage.ru_stime,
            peak_rss_mib=usage.ru_maxrss / 1024, log_tail=text[-TAIL_CHARS:])
