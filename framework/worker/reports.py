"""A worker's report on the coordinator stream (``worker/<id>``, `WorkerReport`): written
when its tasks resumed, whenever what it runs changed in place, and when it stopped; read
by `sampan status`, its supervisor and a host handing tasks over."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from framework.config import JobConfig
from framework.metadata import RestoreStop, WorkerReport, publish_worker_report
from framework.stores.restore import RestoreStopped
from framework.systems.base import System
from framework.worker.commit import Committer
from framework.worker.tasks import Tasks

__all__ = ["Reports", "now_ms", "store_positions"]


def now_ms() -> int:
    return int(time.time() * 1000)


def store_positions(committer: Committer) -> dict[str, dict[str, int]]:
    """Task → store → changelog offset its local store holds: the coordinator's view of
    this worker's local state, for restore-gap-aware placement."""
    positions: dict[str, dict[str, int]] = {}
    for (task, store), offset in sorted(committer.positions.items()):
        positions.setdefault(task, {})[store] = offset
    return positions


class Reports:
    """The last report of one worker (``last``), each new one derived from it."""

    def __init__(self, config: JobConfig, worker_id: int, systems: Mapping[str, System],
                 tasks: Tasks) -> None:
        self.config = config
        self.worker_id = worker_id
        self.systems = systems
        self.tasks = tasks
        self.last: WorkerReport | None = None
        """The report written last (None before the tasks resumed)."""

    async def send(self, report: WorkerReport) -> None:
        await publish_worker_report(self.systems[self.config.metadata_system], self.config,
                                    self.worker_id, report)

    async def resumed(self, epoch: int, started_ms: int, committer: Committer,
                      state: str) -> None:
        """Every task's stores are restored and processing begins."""
        tasks = self.tasks
        self.last = tasks.reported(WorkerReport(
            epoch=epoch, pid=os.getpid(), started_ms=started_ms, resumed_ms=now_ms(),
            restored=tasks.restored, restore_modes=tasks.restore_modes,
            store_positions=store_positions(committer), state=state))
        await self.send(self.last)

    async def update(self, committer: Committer, *, send: bool = True,
                     **changed: Any) -> None:
        """The last report with ``changed`` fields and the tasks now running; written
        unless ``send`` is False (kept for the next)."""
        assert self.last is not None
        self.last = self.tasks.reported(replace(
            self.last, store_positions=store_positions(committer), **changed))
        if send:
            await self.send(self.last)

    async def stopped(self, committer: Committer, reason: str, processed: int, skipped: int,
                      state: str) -> None:
        """The worker stopped running its tasks (``state``: the state it ends in)."""
        assert self.last is not None
        await self.send(replace(
            self.last, stopped_ms=now_ms(), reason=reason, processed=processed,
            skipped=skipped, store_positions=store_positions(committer), state=state))

    async def stopped_restoring(self, epoch: int, started_ms: int, stopped: RestoreStopped,
                                reason: str, state: str) -> None:
        """The worker stopped before its tasks' stores were restored."""
        tasks = self.tasks
        await self.send(WorkerReport(
            epoch=epoch, pid=os.getpid(), started_ms=started_ms, stopped_ms=now_ms(),
            reason=reason, restored=tasks.restored, restore_modes=tasks.restore_modes,
            restore_stopped=RestoreStop(stopped.label, stopped.position, stopped.end),
            tasks=[i.name for i in tasks.instances], state=state))
