"""Typed records of the coordinator stream: what the coordinator and the workers report.

The coordinator writes one `CoordinatorStatus` (key ``status``), each worker one
`WorkerReport` (key ``worker/<id>``), one `WorkerProgress` (key ``progress/<id>``: its
metrics port and live restore progress) and, with queries on, one `QueryEndpoint` (key
``queries/<id>``: where it answers queries); `sampan status`, the drill, `rekey` and
`streams reset-offsets` read them. Each record has one codec (`to_dict` / `from_dict`);
decoding ignores unknown fields and fills missing ones with defaults, so a reader and a
writer of different versions still understand each other.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, Self

__all__ = [
    "ConfigChange",
    "CoordinatorStatus",
    "ExpansionRecord",
    "HostReport",
    "HostState",
    "QueryEndpoint",
    "Refusal",
    "RestoreProgress",
    "RestoreStop",
    "RunState",
    "StuckWorker",
    "Unreachable",
    "WorkerCrashes",
    "WorkerProgress",
    "WorkerReport",
]


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """The entries of ``data`` that are fields of ``cls`` (newer writers may add more)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


RunState = Literal["running", "stopped", "failed"]
"""A coordinator's state in its report and run file; a job that never ran has none."""

HostState = Literal["joining", "running", "stopped", "failed"]
"""A host's state in its report when a job runs on several hosts."""


@dataclass
class _Record:
    """Plain-data codec shared by every record: JSON-ready dicts in and out."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        return cls(**_known(cls, data))


@dataclass
class ExpansionRecord(_Record):
    """One applied input expansion and when each of its steps happened (epoch ms)."""

    change: str
    """``"local.words 2→4"``: the streams whose partition count changed."""
    epoch: int
    detected_ms: int
    workers_stopped_ms: int | None = None
    """None when the expansion happened while the job was stopped."""
    model_published_ms: int | None = None
    workers_started_ms: int | None = None
    resumed_ms: int | None = None
    """When every worker had resumed processing on ``epoch`` (stores restored); None until
    then, and for good when the job restarted first."""
    in_place: bool = False
    """Applied without stopping workers: they took the model where they run."""

    @property
    def pause_ms(self) -> int | None:
        """The expansion's pause: detection until every worker resumed on the new epoch
        (the one definition, for `sampan status` and ``sampan_expansion_pause_seconds``)."""
        return None if self.resumed_ms is None else self.resumed_ms - self.detected_ms


@dataclass
class Refusal(_Record):
    """A partition change the coordinator refused (the job keeps running on its model)."""

    change: str
    error: str
    detected_ms: int
    counts: dict[str, int] = field(default_factory=dict)
    """The refused partition counts (a refusal is logged once per distinct counts)."""


@dataclass
class ConfigChange(_Record):
    """The job file was edited while the job runs; the job keeps its configuration."""

    change: str
    detected_ms: int


@dataclass
class StuckWorker(_Record):
    """A worker the task watchdog stopped because a task call made no progress."""

    worker: int
    detail: str | None
    at_ms: int


@dataclass
class WorkerCrashes(_Record):
    """A worker's recent crashes, for `sampan status` to show a crash loop as it happens."""

    worker: int
    exits_ms: list[int] = field(default_factory=list)
    """When it crashed (epoch ms), within the coordinator's crash window."""
    last_exit: str = ""
    """How it last ended: ``exited with status 2``, ``killed by SIGKILL``."""
    last_error: str | None = None
    """The last error line of its log."""
    restart_ms: int | None = None
    """When its restart is due while it is down (backoff); None once it runs again."""
    restarted_ms: int | None = None
    """When it was last started again after a crash."""


@dataclass
class Unreachable(_Record):
    """A system of the job the coordinator could not reach, since when (epoch ms)."""

    system: str
    since_ms: int
    error: str
    checked_ms: int
    """The last failed attempt."""


@dataclass
class CoordinatorStatus(_Record):
    """The coordinator's report: its state, workers, expansions and what it refused."""

    state: RunState | None = None
    """None before the first report."""
    phase: str | None = None
    """The coordinator's lifecycle phase (`framework.coordinator.phase.CoordinatorPhase`
    name, e.g. ``RUNNING``, ``CHANGING_MODEL``); None from a coordinator that had none."""
    epoch: int | None = None
    coordinator_pid: int | None = None
    updated_ms: int | None = None
    worker_logs: str | None = None
    """The folder of the workers' ``worker-N.log`` files."""
    worker_pids: dict[int, int] = field(default_factory=dict)
    restarts: int = 0
    expansions: list[ExpansionRecord] = field(default_factory=list)
    refusal: Refusal | None = None
    error: str | None = None
    config_change: ConfigChange | None = None
    stuck: StuckWorker | None = None
    metrics_port: int | None = None
    """The port of the coordinator's ``/metrics`` endpoint; None when metrics are off."""
    metrics_bind: str | None = None
    """The address the job's ``/metrics`` endpoints listen on."""
    coordinator_host: str | None = None
    """The machine the coordinator runs on (its pid is checked there)."""
    crashes: list[WorkerCrashes] = field(default_factory=list)
    """Workers that crashed within the crash window."""
    crash_window_ms: int | None = None
    max_restarts: int | None = None
    """The crash window and the crashes in it the coordinator tolerates per worker."""
    unreachable: list[Unreachable] = field(default_factory=list)
    """Systems of the job the coordinator cannot reach now."""
    idle_workers: list[int] = field(default_factory=list)
    """Workers the job model gives no task (more workers than tasks)."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        known = _known(cls, data)
        known["worker_pids"] = {int(w): int(p) for w, p in
                                (known.get("worker_pids") or {}).items()}
        known["expansions"] = [ExpansionRecord.from_dict(e)
                               for e in known.get("expansions") or []]
        known["crashes"] = [WorkerCrashes.from_dict(c) for c in known.get("crashes") or []]
        known["unreachable"] = [Unreachable.from_dict(u)
                                for u in known.get("unreachable") or []]
        for name, record in (("refusal", Refusal), ("config_change", ConfigChange),
                             ("stuck", StuckWorker)):
            if known.get(name) is not None:
                known[name] = record.from_dict(known[name])
        return cls(**known)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["worker_pids"] = {str(w): p for w, p in self.worker_pids.items()}
        return data


@dataclass
class RestoreStop(_Record):
    """Where a restore stopped when the worker was asked to stop mid-restore."""

    store: str
    position: int
    end: int


@dataclass
class WorkerReport(_Record):
    """A worker's report: written when its tasks resumed and again when it stopped."""

    epoch: int
    pid: int
    started_ms: int
    resumed_ms: int | None = None
    """When every task's stores were restored and processing began."""
    stopped_ms: int | None = None
    reason: str | None = None
    tasks: list[str] = field(default_factory=list)
    restored: int = 0
    """Changelog records restored at this start, over all stores."""
    restore_modes: dict[str, str] = field(default_factory=dict)
    """``"task/store"`` → ``none`` | ``delta`` | ``full``."""
    store_positions: dict[str, dict[str, int]] = field(default_factory=dict)
    """Task → store → the changelog offset its local copy holds."""
    processed: int | None = None
    skipped: int | None = None
    restore_stopped: RestoreStop | None = None
    in_place_changes: int = 0
    """Newer job models this worker took without restarting (``epoch`` is the last)."""
    in_place_ms: int | None = None
    """How long taking the last of them held this worker's loop (commit, new partitions)."""
    restored_tasks: dict[str, int] = field(default_factory=dict)
    """Task → changelog records restored when this process last started or added it (the
    tasks it runs)."""
    task_epochs: dict[str, int] = field(default_factory=dict)
    """Task → the epoch at which this process last started or added it (empty from a
    worker older than this field: its `restored_tasks` were then this epoch's only)."""
    restored_ends: dict[str, int] = field(default_factory=dict)
    """Task → the changelog offsets its stores were restored to then (summed): its
    `store_positions` move on as it runs (empty from a worker older than this field)."""
    state: str | None = None
    """The worker's lifecycle state when it wrote this report
    (`framework.worker.states.WorkerState` name: ``RUNNING`` while it runs, then
    ``STOPPED``, ``FAILED``...); None from a worker older than this field."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        known = _known(cls, data)
        if known.get("restore_stopped") is not None:
            known["restore_stopped"] = RestoreStop.from_dict(known["restore_stopped"])
        return cls(**known)


@dataclass
class HostReport(_Record):
    """One host's report when a job runs on several hosts (key ``host/<name>``): what it
    runs at which epoch, how its tasks' stores were restored, how far its replicas are."""

    host: str
    pid: int
    machine: str
    epoch: int | None = None
    state: HostState = "running"
    phase: str | None = None
    """The host's lifecycle phase (`framework.hosts.phase.HostPhase` name, e.g. ``RUNNING``,
    ``REBALANCING``); None from a host that had none."""
    metrics_port: int | None = None
    """The port of the host's own ``/metrics`` endpoint; None when metrics are off."""
    leader: bool = False
    updated_ms: int | None = None
    workers: list[int] = field(default_factory=list)
    active: list[str] = field(default_factory=list)
    standby: list[str] = field(default_factory=list)
    warmup: list[str] = field(default_factory=list)
    replica_gaps: dict[str, int] = field(default_factory=dict)
    """Standby or warmup task → changelog records its local copy is behind."""
    restored: dict[str, int] = field(default_factory=dict)
    """Active task → changelog records restored when it started at this epoch."""
    restore_modes: dict[str, str] = field(default_factory=dict)
    """``"task/store"`` → ``none`` | ``delta`` | ``full`` at this epoch's start."""
    restore_ends: dict[str, int] = field(default_factory=dict)
    """Active task → the changelog offsets it was restored to (summed over its stores): a
    full restore from an untruncated changelog reads this many records."""
    assigned_ms: int | None = None
    """When this host received the epoch's assignment."""
    resumed_ms: int | None = None
    """When every worker of this host had resumed processing at this epoch."""
    error: str | None = None
    revoked_ms: int | None = None
    """When this host stopped its tasks for the rebalance that led to this epoch (None:
    it joined with none running)."""
    gained: dict[str, str] = field(default_factory=dict)
    """Active task new here at this epoch → the host that ran it before ("" if none)."""
    lost: list[str] = field(default_factory=list)
    """Tasks active here before this epoch's rebalance and not any more."""
    unavailable_ms: dict[str, int] = field(default_factory=dict)
    """Active task → how long it did not run here in the rebalance: from `revoked_ms` (or,
    for a task gained from another host, that host's stop when it reported one) until
    its worker resumed; set once every worker of this host resumed."""
    moved_epoch: int | None = None
    """The epoch of the rebalance that `gained`, `lost`, `unavailable_ms` and the restores
    describe: the last one that moved a task to or from this host (for an incremental
    rebalance, its first model's epoch, which its follow-up shares)."""


@dataclass
class RestoreProgress(_Record):
    """One store restore in progress: records applied of the total, and the rate so far."""

    task: str
    store: str
    restored: int
    to_restore: int
    rate: float
    """Records per second since the restore started."""
    started_ms: int

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the current rate; None before the rate is known."""
        return (self.to_restore - self.restored) / self.rate if self.rate > 0 else None


@dataclass
class WorkerProgress(_Record):
    """A worker process's live facts (key ``progress/<id>``): its metrics port, written
    when it starts, and its restores in progress, written every second while it restores."""

    epoch: int
    pid: int
    started_ms: int
    updated_ms: int
    metrics_port: int | None = None
    restoring: list[RestoreProgress] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        known = _known(cls, data)
        known["restoring"] = [RestoreProgress.from_dict(r) for r in known.get("restoring") or []]
        return cls(**known)


@dataclass
class QueryEndpoint(_Record):
    """Where a worker answers interactive queries (key ``queries/<id>``): written when its
    endpoint listens, and with ``url`` None when it stops (`framework.queries`)."""

    epoch: int
    pid: int
    started_ms: int
    url: str | None
    """``http://host:port`` as the other endpoints and clients reach it; None: stopped."""
    host: str | None = None
    """The job's host running the worker (several hosts), else None."""
