"""The host drill's job file and its host processes (one process group and state folder
each), started as `sampan run JOB --host NAME --data-dir DIR`."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from framework.systems.kafka.options import toml_inline

__all__ = ["HostProcesses", "write_job"]


def write_job(folder: Path, bootstrap: str, name: str, *, partitions: int, standbys: int,
              session_timeout_ms: int, extra: str = "", namespace: str = "",
              client_options: Mapping[str, Any] | None = None) -> Path:
    """A per-key sum job over ``kafka.<name>-in`` with one worker per host and the fast
    timeouts a drill wants (every value is an ordinary job key, see docs/hosts.md);
    ``extra`` adds ``[job]`` lines (the tests use it); ``namespace`` and
    ``client_options`` (security, say): the Kafka system's `client_options`."""
    given = {**(client_options or {}), **({"namespace": namespace} if namespace else {})}
    options = f"client_options = {toml_inline(given)}\n" if given else ""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "job.toml"
    path.write_text(f"""\
[job]
name = "{name}"
task = "framework.drill.sum_task:SumTask"
inputs = ["kafka.{name}-in"]
workers = 1
commit_interval_ms = 200
standby_replicas = {standbys}
{extra}
[coordinator]
monitor_interval_ms = 1000
worker_stop_timeout_ms = 5000
session_timeout_ms = {session_timeout_ms}
probing_rebalance_interval_ms = 2000
acceptable_recovery_lag = 0

[systems.kafka]
type = "kafka"
bootstrap = "{bootstrap}"
{options}
[streams."kafka.{name}-in"]
partitions = {partitions}
key_serde = "string"
value_serde = "json"

[stores.totals]
key_serde = "string"
value_serde = "json"
""")
    return path


@dataclass
class HostProcesses:
    """Host processes of one job by label (default: the host's name), each in its own
    session (process group), logging to ``<root>/<log_prefix><label>.log``; used by the
    host drill, `bench.failover` and the hosts tests."""

    job: Path
    root: Path
    log_prefix: str = "host-"
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    logs: dict[str, IO[bytes]] = field(default_factory=dict)
    killed: set[str] = field(default_factory=set)

    def log_path(self, label: str) -> Path:
        return self.root / f"{self.log_prefix}{label}.log"

    def start(self, name: str, label: str | None = None, data: str | None = None,
              env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start host ``name``. ``label`` (default the name) names its process and log;
        its state folder is ``data-<data>`` (default: the label's); ``env`` adds
        environment variables (fault injection)."""
        label = label or name
        log = self.log_path(label).open("ab")
        process = subprocess.Popen(
            [sys.executable, "-m", "framework.cli", "run", str(self.job), "--host", name,
             "--data-dir", str(self.root / f"data-{data or label}")],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, **(env or {})})
        self.processes[label] = process
        self.logs[label] = log
        return process

    def dead(self) -> list[str]:
        """Hosts that exited although nobody killed them."""
        return [n for n, p in self.processes.items()
                if n not in self.killed and p.poll() is not None]

    def kill(self, label: str) -> None:
        """SIGKILL the host's whole process group: the host and its workers at once."""
        self.killed.add(label)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.processes[label].pid, signal.SIGKILL)
        self.processes[label].wait(30)

    def stop_all(self, timeout_s: float = 30) -> None:
        """SIGTERM every host, SIGKILL the process group of any that does not exit."""
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
            with contextlib.suppress(ProcessLookupError):  # workers left behind, if any
                os.killpg(process.pid, signal.SIGKILL)
        for log in self.logs.values():
            log.close()
