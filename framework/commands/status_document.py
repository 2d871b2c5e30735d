"""The typed status `sampan status` reports: built by `framework.commands.status`, read by
the text, ``--watch`` and health code, and written by `JobStatus.to_json` as the ``--json``
document (one JSON shape per kind of status: full, metadata unreachable, never started).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from framework.metadata import (
    CoordinatorStatus,
    ExpansionRecord,
    HostReport,
    RestoreProgress,
    RunState,
    Unreachable,
    WorkerReport,
)

__all__ = [
    "Endpoints",
    "ExpansionRow",
    "Health",
    "HostRow",
    "JobFigures",
    "JobState",
    "JobStatus",
    "LocalRun",
    "ResetRow",
    "RestoreRow",
    "SspRow",
    "TaskHosts",
    "TaskRow",
]

JobState = Literal["running", "died", "failed", "stopped", "not started", "unknown"]
"""The job's state as it truly is: ``died`` is a ``running`` report whose coordinator is
gone; ``unknown`` a model without any report."""

HealthName = Literal["healthy", "degraded", "not running", "failed"]

EXIT_STATUS: dict[HealthName, int] = {"healthy": 0, "degraded": 1, "not running": 3,
                                      "failed": 4}
"""Exit status per health; 2 is the CLI's status for a command that failed."""


@dataclass(frozen=True)
class Health:
    """The verdict on a job: ``health`` and why (``problems``, one line each)."""

    health: HealthName
    problems: list[str] = field(default_factory=list)

    @property
    def exit_status(self) -> int:
        return EXIT_STATUS[self.health]


@dataclass
class SspRow:
    """One input partition of a task: its checkpointed position, end and lag."""

    ssp: tuple[str, str, int]
    position: int | None
    end: int
    lag: int
    held: bool
    """Behind an expansion barrier the task has not passed."""
    past_end: bool
    """The checkpoint is past the end: the stream was recreated or truncated."""


@dataclass
class TaskRow:
    """One task: where it runs, its barrier progress, inputs, lag and rate."""

    task: str
    worker: int
    barrier_stages: int
    barrier_stages_passed: int
    changelog_partition: int
    ssps: list[SspRow]
    lag_by_stream: dict[str, int]
    rate: float | None = None
    """Records per second scraped from its worker; None when not scraped."""


@dataclass
class Endpoints:
    """The job's ``/metrics`` URLs and where Prometheus finds them all (file_sd)."""

    coordinator: str | None
    workers: dict[str, str]
    file_sd: str = ""
    hosts: dict[str, str] = field(default_factory=dict)
    """Several hosts: each running host's own endpoint."""


@dataclass
class RestoreRow:
    """A store restore in progress on a worker of the current epoch."""

    worker: int
    progress: RestoreProgress
    updated_ms: int | None

    def to_json(self) -> dict[str, Any]:
        return {"worker": self.worker, **self.progress.to_dict(),
                "eta_s": self.progress.eta_s, "updated_ms": self.updated_ms}


@dataclass
class ExpansionRow:
    """An applied expansion, with why its pause is unknown when it is."""

    record: ExpansionRecord
    pause_note: str | None

    def to_json(self) -> dict[str, Any]:
        return {**self.record.to_dict(), "pause_ms": self.record.pause_ms,
                "pause_note": self.pause_note}


@dataclass
class ResetRow:
    """A task's input position retention moved past (records deleted unread)."""

    stream: str
    partition: int
    task: str
    from_offset: int
    to_offset: int
    reset_ms: int
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"stream": self.stream, "partition": self.partition, "task": self.task,
                "from": self.from_offset, "to": self.to_offset, "reset_ms": self.reset_ms,
                "message": self.message}


@dataclass
class HostRow:
    """A host's report, and whether the current model places tasks on it."""

    report: HostReport
    in_model: bool

    def to_json(self) -> dict[str, Any]:
        return {**self.report.to_dict(), "in_model": self.in_model}


@dataclass
class TaskHosts:
    """Where a task runs on several hosts: active, standby and warm-up copies."""

    active: str | None
    standby: list[str]
    warmup: list[str]
    input_lag: int


@dataclass
class JobFigures:
    """What the job is doing (read from its metadata system): only in a full status."""

    epoch: int
    reason: str
    partition_counts: dict[str, int]
    workers: int
    expansions: list[ExpansionRow]
    restoring: list[RestoreRow]
    metrics: Endpoints
    worker_reports: dict[str, WorkerReport]
    total_lag: int
    tasks: list[TaskRow]
    retention_resets: list[ResetRow]
    hosts: dict[str, HostRow] | None = None
    """Several hosts only: each host's report."""
    task_hosts: dict[str, TaskHosts] | None = None
    idle_workers: list[int] = field(default_factory=list)
    idle_message: str | None = None
    stream_partition_counts: dict[str, int] = field(default_factory=dict)
    """Each input's partition count in its system now (`partition_counts` is the count
    the job model reads: fewer while an input is held or a growth is not applied yet)."""
    held_inputs: list[str] = field(default_factory=list)
    """Inputs the job reads only up to where a refused partition change began."""

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "epoch": self.epoch, "reason": self.reason,
            "partition_counts": self.partition_counts,
            "stream_partition_counts": self.stream_partition_counts,
            "held_inputs": self.held_inputs, "workers": self.workers,
            "expansions": [row.to_json() for row in self.expansions],
            "restoring": [row.to_json() for row in self.restoring],
            "metrics": _plain(self.metrics),
            "worker_reports": {k: v.to_dict() for k, v in self.worker_reports.items()},
            "total_lag": self.total_lag, "tasks": [_plain(row) for row in self.tasks],
            "retention_resets": [row.to_json() for row in self.retention_resets],
            "idle_workers": self.idle_workers, "idle_message": self.idle_message,
        }
        if self.hosts is not None and self.task_hosts is not None:
            document["hosts"] = {name: row.to_json() for name, row in self.hosts.items()}
            document["task_hosts"] = {task: _plain(row) for task, row in self.task_hosts.items()}
        return document


_REPORTED = ("phase", "refusal", "worker_logs", "config_change", "stuck", "restarts", "crashes",
             "crash_window_ms", "max_restarts", "coordinator_pid", "coordinator_host",
             "updated_ms")
"""What a full status shows of the coordinator's report as it is."""


@dataclass
class LocalRun:
    """The run file of the job's coordinator on this machine, read while the metadata
    system does not answer this command."""

    coordinator_pid: int
    coordinator_host: str
    started_ms: int


@dataclass
class JobStatus:
    """The job's status: its true state and health, and, as far as they could be read,
    what it is doing (``figures``, with the coordinator's ``report``) or the local run
    (``local_run``: the metadata system does not answer)."""

    job: str
    state: JobState
    recorded_state: RunState | None
    not_running: str | None
    health: Health = field(default_factory=lambda: Health("not running"))
    error: str | None = None
    unreachable: list[Unreachable] = field(default_factory=list)
    """Systems the coordinator cannot reach."""
    figures: JobFigures | None = None
    report: CoordinatorStatus | None = None
    local_run: LocalRun | None = None

    @property
    def exit_status(self) -> int:
        return self.health.exit_status

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document."""
        document: dict[str, Any] = {"job": self.job, "state": self.state,
                                    "recorded_state": self.recorded_state,
                                    "not_running": self.not_running}
        if self.figures is not None and self.report is not None:
            report = self.report.to_dict()
            document.update({name: report[name] for name in _REPORTED})
            document.update(self.figures.to_json(), error=self.error,
                            unreachable=[u.to_dict() for u in self.unreachable])
        elif self.local_run is not None:
            document.update(_plain(self.local_run), metadata_reachable=False,
                            unreachable=[u.to_dict() for u in self.unreachable])
            if self.state == "failed":
                document["error"] = self.error
        document.update(health=self.health.health, problems=self.health.problems,
                        exit_status=self.health.exit_status)
        return document


def _plain(row: Any) -> dict[str, Any]:
    """A dataclass of plain fields (nested ones included) as JSON-ready data."""
    return asdict(row)
