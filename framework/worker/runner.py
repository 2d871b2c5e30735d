"""A worker: one process running the tasks a job model places on it (Samza's container).
`Worker` composes the parts — its tasks (`tasks`), the job model it follows (`following`),
its report (`reports`), the loop (`loop`: routing, processing, commit scheduling, changes
in place) — and moves its `WorkerState` (`states`) from start to end."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from framework.api import StreamTask, load_task_class
from framework.config import JobConfig
from framework.errors import FencedError, StoreCorruptedError, StoreError
from framework.lifecycle import Lifecycle
from framework.metadata import CoordinatorReader
from framework.metadata.jobmodel import JobModel
from framework.metrics import WorkerMetrics
from framework.queries.hook import start_queries
from framework.stores.restore import RestoreStopped
from framework.systems.base import System
from framework.worker.collector import tuned_collector
from framework.worker.following import Following
from framework.worker.instance import TaskInstance
from framework.worker.loop import WorkerLoop
from framework.worker.reports import Reports, now_ms
from framework.worker.routing import Routing
from framework.worker.scheduling import close_stores
from framework.worker.startup import load_model, open_systems, wait_for_go
from framework.worker.states import ENDS, WORKER_TRANSITIONS, WorkerState
from framework.worker.task_stores import heal_damaged_store
from framework.worker.tasks import Tasks
from framework.worker.watchdog import Busy

if TYPE_CHECKING:
    from framework.queries.server import QueryServer

__all__ = ["Worker", "WorkerResult"]

log = logging.getLogger(__name__)


async def _closing(closed: Awaitable[None], what: str) -> None:
    try:
        await closed
    except Exception as error:
        log.warning("closing %s failed: %s", what, error)


@dataclass
class WorkerResult:
    """What a worker did before it stopped."""

    epoch: int
    processed: int
    skipped: int
    commits: int
    restored: int
    reason: str


class Worker:
    """Runs the tasks ``model`` places on ``worker_id`` until stopped, fenced or told to."""

    def __init__(
        self,
        config: JobConfig,
        worker_id: int,
        *,
        model: JobModel | None = None,
        stop: asyncio.Event | None = None,
        go: Callable[[], Awaitable[bool]] | None = None,
        in_place: bool | None = None,
    ) -> None:
        self.config = config
        self.worker_id = worker_id
        self.lifecycle = Lifecycle(f"worker {worker_id} of job {config.name!r}",
                                   WorkerState.STARTING, WORKER_TRANSITIONS)
        self.go = go
        """A prepared worker (`sampan run` starts it ahead): once its systems are open it
        awaits ``go()`` — True: load the model and run; False: exit at once, unused."""
        self.stop = stop or asyncio.Event()
        self.systems: dict[str, System] = {}
        self.metrics = WorkerMetrics(config, worker_id)
        self.tasks = Tasks(config, self.systems, self.stop.is_set)
        self.reports = Reports(config, worker_id, self.systems, self.tasks)
        self.following = Following(
            worker_id, config.digest, model, check=self._check_fence,
            in_place=(model is None and config.coordinator.model_changes == "in-place"
                      if in_place is None else in_place),
            on_newer=lambda: self.lifecycle.to(WorkerState.CHANGING))
        self.loop = WorkerLoop(config, worker_id, self.systems, self.stop, self.lifecycle,
                               self.tasks, self.following, self.reports, self.metrics)
        self.queries: QueryServer | None = None
        """The query endpoint (`framework.queries`), with ``[queries] enabled``."""
        self._reader: CoordinatorReader | None = None
        """Reads the coordinator stream (opened with the systems)."""

    @property
    def state(self) -> WorkerState:
        return self.lifecycle.state

    @property
    def model(self) -> JobModel | None:
        """The job model it runs (`Following.model`)."""
        return self.following.model

    @model.setter
    def model(self, model: JobModel | None) -> None:
        self.following.model = model

    @property
    def in_place(self) -> bool:
        """Take a newer job model of the coordinator stream in place when it only adds
        partitions to this worker's tasks (`framework.worker.in_place`); by default off
        for a worker given its model (a host's worker turns it on)."""
        return self.following.in_place

    @property
    def in_place_changes(self) -> int:
        """Newer job models this worker took without restarting."""
        return self.loop.changes.taken

    @property
    def instances(self) -> list[TaskInstance]:
        """The tasks running here (`Tasks.instances`)."""
        return self.tasks.instances

    @property
    def restored(self) -> int:
        return self.tasks.restored

    @property
    def restore_modes(self) -> dict[str, str]:
        return self.tasks.restore_modes

    @property
    def routing(self) -> Routing:
        return self.loop.routing

    @property
    def merge_waiting(self) -> dict[str, int]:
        """Task → records of its new partitions waiting for the old ones after an
        expansion (`framework.worker.merging`)."""
        return self.routing.merging.waiting_by_task()

    @property
    def busy(self) -> Busy | None:
        """The call in progress, for the task watchdog (`framework.worker.watchdog`)."""
        return self.loop.processing.busy

    async def run(self) -> WorkerResult:
        """Open everything, loop until stopped, commit and close; returns a summary."""
        ended = WorkerState.FAILED
        try:
            task_class = load_task_class(self.config)  # a bad job.task fails before any I/O
            await open_systems(self.config, self.systems)
            self.following.source = self._reader = CoordinatorReader(
                self.systems[self.config.metadata_system], self.config)
            if self.go is not None and not await wait_for_go(self.go, self.stop):
                self.lifecycle.to(WorkerState.STOPPING)
                ended = WorkerState.STOPPED
                return WorkerResult(0, 0, 0, 0, 0, "not needed")
            result = await self._run(task_class, now_ms())
            ended = WorkerState.STOPPED
            return result
        except FencedError:
            ended = WorkerState.FENCED
            raise
        except StoreCorruptedError as error:
            await self._close(ended)  # closed first: then wipe it for a full restore
            heal_damaged_store(self.config, error)
            raise StoreError(f"{error}; wiped {error.path}: the next start of this worker "
                             f"restores it fully from its changelog") from error
        finally:
            await self._close(ended)

    async def _run(self, task_class: type[StreamTask], started_ms: int) -> WorkerResult:
        """Load the model, restore and run the tasks, report their end."""
        assert self._reader is not None
        model = self.model = await load_model(self.config, self.worker_id, self.model,
                                              self._reader)
        await self.metrics.attach(self, model.epoch, started_ms)
        # Issue 49 hook: the query endpoint answers for the tasks in `instances`.
        self.queries = await start_queries(self.config, self,
                                           self.systems[self.config.metadata_system])
        self.lifecycle.to(WorkerState.RESTORING)
        try:
            committer = await self.loop.start(task_class)
        except RestoreStopped as stopped:
            # what was applied stays, so the next start restores only the rest
            self.lifecycle.to(WorkerState.STOPPING)
            self.tasks.restored += stopped.applied
            log.info("worker %d stopped while restoring: %s", self.worker_id, stopped)
            reason = "stopped while restoring"
            await self.reports.stopped_restoring(model.epoch, started_ms, stopped, reason,
                                                 WorkerState.STOPPED.name)
            return WorkerResult(model.epoch, 0, 0, 0, self.restored, reason)
        self.lifecycle.to(WorkerState.RUNNING)
        await self.metrics.resumed()
        await self.reports.resumed(model.epoch, started_ms, committer, self.state.name)
        with tuned_collector():
            reason = await self.loop.run(committer, task_class)
        undecodable = self.loop.processing.undecodable
        if undecodable is not None:
            reason = "a record it cannot decode"
        assert self.reports.last is not None
        result = WorkerResult(self.reports.last.epoch, sum(i.processed for i in self.instances),
                              sum(i.skipped for i in self.instances), committer.commits,
                              self.restored, reason)
        await self.reports.stopped(committer, reason, result.processed, result.skipped,
                                   (WorkerState.STOPPED if undecodable is None
                                    else WorkerState.FAILED).name)
        if undecodable is not None:
            raise undecodable
        return result

    async def _check_fence(self) -> None:
        """`FencedError` once this worker's epoch is no longer the job's current one."""
        assert self.model is not None
        await self.systems[self.config.metadata_system].check_fence(self.config.name,
                                                                    self.model.epoch)

    async def _close(self, ended: WorkerState) -> None:
        """Close everything (once), then end in ``ended``; a failure to close is logged,
        never masks the error that stopped the worker."""
        if self.state in ENDS:
            return
        try:
            await self._close_all()
        finally:
            self.lifecycle.to(ended)

    async def _close_all(self) -> None:
        if self.queries is not None:  # issue 49 hook: first, so nothing reads closed stores
            await _closing(self.queries.close(), "the query endpoint")
        await self.metrics.close()
        if self._reader is not None:
            await _closing(self._reader.close(), "the coordinator stream's reader")
        for consumer in self.routing.consumers.values():
            await _closing(consumer.close(), "a consumer")
        for instance in [*self.instances, *self.loop.schedule.releasing.values()]:
            close_stores(instance)
        for system in self.systems.values():
            await _closing(system.close(), f"system {system.name!r}")
