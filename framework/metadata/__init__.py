"""A job's metadata: the coordinator stream's codec and the typed records it carries.

Neutral ground: the coordinator writes models and its status here, workers read models
and write their reports here, commands read both — none of them imports another for it.
"""

from framework.metadata.records import (
    ConfigChange,
    CoordinatorStatus,
    ExpansionRecord,
    HostReport,
    HostState,
    Refusal,
    RestoreProgress,
    RestoreStop,
    RunState,
    StuckWorker,
    Unreachable,
    WorkerCrashes,
    WorkerProgress,
    WorkerReport,
)
from framework.metadata.stream import (
    MODEL_KEY,
    PROGRESS_PREFIX,
    STATUS_KEY,
    WORKER_PREFIX,
    CoordinatorReader,
    CoordinatorState,
    ensure_coordinator_stream,
    publish_host_report,
    publish_model,
    publish_status,
    publish_worker_progress,
    publish_worker_report,
    read_latest_model,
    read_state,
)

__all__ = [
    "MODEL_KEY",
    "PROGRESS_PREFIX",
    "STATUS_KEY",
    "WORKER_PREFIX",
    "ConfigChange",
    "CoordinatorReader",
    "CoordinatorState",
    "CoordinatorStatus",
    "ExpansionRecord",
    "HostReport",
    "HostState",
    "Refusal",
    "RestoreProgress",
    "RestoreStop",
    "RunState",
    "StuckWorker",
    "Unreachable",
    "WorkerCrashes",
    "WorkerProgress",
    "WorkerReport",
    "ensure_coordinator_stream",
    "publish_host_report",
    "publish_model",
    "publish_status",
    "publish_worker_progress",
    "publish_worker_report",
    "read_latest_model",
    "read_state",
]
