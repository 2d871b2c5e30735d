"""The workers of `sampan run`, started before the coordinator imports and connects.

A worker process spends most of its start in the interpreter and its imports; started
first, that overlaps the coordinator's own imports, connections, lease and model instead
of following them. Each waits for go (`Supervisor.prepare`): nothing it writes precedes
a model published under the held lease. This module imports only the supervisor and the
configuration snapshot, so the spawn comes before the coordinator's heavy imports.

Only where there is a core for each process: with fewer, the workers' imports take CPU
the coordinator needs on the way to the go, and they are better started once it has
imported and connected (the coordinator then prepares them itself, before its lease).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from framework.config import JobConfig
from framework.config.snapshot import snapshot_config
from framework.coordinator.supervisor import Supervisor

__all__ = ["WORKERS_FIRST_ENV", "prepare_workers", "worker_supervisor", "workers_first"]

WORKERS_FIRST_ENV = "SAMPAN_WORKERS_FIRST"
"""``1``: start the workers before the coordinator's imports; unset or anything else (the
default): once the coordinator has imported and connected."""


def workers_first() -> bool:
    """Whether `sampan run` starts its workers before its own imports: only when
    ``SAMPAN_WORKERS_FIRST=1`` asks for it. Off by default: a worker started that early
    also reports a job file's error the run itself reports (a second error line), and on
    two cores its imports slowed the coordinator (docs/performance.md)."""
    return os.environ.get(WORKERS_FIRST_ENV, "").strip() == "1"


def worker_supervisor(config: JobConfig, log_dir: Path | None,
                      stop: asyncio.Event) -> Supervisor:
    """The supervisor of ``config``'s workers (the coordinator sets its ``on_exit``)."""
    return Supervisor(
        config.path, log_dir=log_dir or config.state_dir / "logs", tee=log_dir is None,
        stop_timeout_s=config.coordinator.worker_stop_timeout_ms / 1000,
        restart_backoff_s=config.coordinator.worker_restart_backoff_ms / 1000,
        max_restarts=config.coordinator.max_worker_restarts,
        crash_window_s=config.coordinator.crash_window_ms / 1000, stop=stop)


async def prepare_workers(config: JobConfig, log_dir: Path | None,
                          stop: asyncio.Event) -> Supervisor:
    """A supervisor whose ``config.workers`` workers are started and wait for go, on the
    configuration snapshot of this run (the job file may change while it runs)."""
    supervisor = worker_supervisor(config, log_dir, stop)
    supervisor.config_snapshot = snapshot_config(config)
    await supervisor.prepare(config.workers)
    return supervisor
