"""The worker loop: fetch a batch → process → window on schedule → commit on schedule."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from framework.api import StreamTask
from framework.config import JobConfig, StreamRef
from framework.errors import (
    FencedError,
    JobModelError,
    PermanentError,
    ProcessingError,
    StoreCorruptedError,
    StoreError,
)
from framework.inputs_check import start_positions
from framework.jobmodel import BarrierStage, JobModel, TaskModel
from framework.metadata import (
    CoordinatorReader,
    RestoreStop,
    WorkerReport,
    publish_worker_report,
)
from framework.metrics import WorkerMetrics
from framework.queries.hook import start_queries
from framework.stores.buffer import TaskStore
from framework.stores.restore import RestoreStopped
from framework.systems import open_system
from framework.systems.base import Checkpoint, Consumer, FetchedRecord, System
from framework.systems.fetched import FetchedColumns
from framework.usercode import load_task_class
from framework.wording import counted
from framework.worker.codec import RecordCodec
from framework.worker.collector import tuned_collector
from framework.worker.commit import Committer, begin_commits
from framework.worker.dispatch import (
    Batch,
    dispatch_batch,
    dispatch_many,
    dispatch_one,
    fetcher,
)
from framework.worker.in_place import InPlaceChange, in_place_change
from framework.worker.instance import TaskInstance
from framework.worker.policies import ErrorPolicies, UndecodableRecordError, describe
from framework.worker.state import OpenedStores, heal_damaged_store, open_task_stores
from framework.worker.watchdog import Busy, TaskWatchdog
from groupers import SystemStreamPartition

if TYPE_CHECKING:
    from framework.queries.server import QueryServer

__all__ = ["Worker", "WorkerResult"]

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


async def _closing(closed: Awaitable[None], what: str) -> None:
    try:
        await closed
    except Exception as error:
        log.warning("closing %s failed: %s", what, error)


FENCE_CHECK_S = 1.0
"""How often a worker asks whether its epoch is still the job's current one."""
MODEL_WAIT_S = 10.0
"""How long a fenced worker waits for the newer model to be on the coordinator stream (its
publisher moves the fence first, then writes it)."""
FENCE_CHECK_IDLE_S = 0.2
"""How often it asks while its fetches find nothing: where an input grew, reading stops
until the model of the new count arrives, and a model taken in place ends that wait."""

Adding = tuple[Checkpoint | None, OpenedStores, dict[SystemStreamPartition, int]]
"""A task added in place, made ready aside: its checkpoint, restored stores and where its
inputs start (`Worker._open_added`)."""


def _close_stores(instance: TaskInstance) -> None:
    """Close every store of ``instance``; a failure is logged, never raised (it must not
    mask what stopped the task)."""
    for name, store in instance.stores.items():
        try:
            store.close()
        except Exception as error:
            log.warning("closing store %r of task %r failed: %s", name, instance.name, error)


def _store_positions(committer: Committer) -> dict[str, dict[str, int]]:
    """Task → store → changelog offset its local store holds: the coordinator's view of
    this worker's local state, for restore-gap-aware placement."""
    positions: dict[str, dict[str, int]] = {}
    for (task, store), offset in sorted(committer.positions.items()):
        positions.setdefault(task, {})[store] = offset
    return positions


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
        self.in_place = (model is None and config.coordinator.model_changes == "in-place"
                         if in_place is None else in_place)
        """Take a newer job model of the coordinator stream in place when it only adds
        partitions to this worker's tasks (`framework.worker.in_place`); by default off
        for a worker given its model (a host's worker turns it on)."""
        self._task_class: type[StreamTask] | None = None
        self._report_base: WorkerReport | None = None
        self.in_place_changes = 0
        """Newer job models this worker took without restarting."""
        self.go = go
        """A prepared worker (`sampan run` starts it ahead): once its systems are open it
        awaits ``go()`` — True: load the model and run; False: exit at once, unused."""
        self.worker_id = worker_id
        self.model = model
        self.stop = stop or asyncio.Event()
        self.systems: dict[str, System] = {}
        self.instances: list[TaskInstance] = []
        self._routes: dict[SystemStreamPartition, list[TaskInstance]] = {}
        self._stages: dict[str, list[BarrierStage]] = {}
        self._limits: dict[SystemStreamPartition, int] = {}
        """Held inputs' SSPs → the offset their reading stops at (`JobModel.holds`)."""
        self._at_limit: set[SystemStreamPartition] = set()
        """Limited SSPs a fetch reached the limit of (records past it were dropped)."""
        self._approaching: set[SystemStreamPartition] = set()
        """Limited SSPs still assigned: no prefetch while one is (a cut reassigns)."""
        self._consumers: dict[str, Consumer] = {}
        self._reading: dict[str, tuple[SystemStreamPartition, ...]] = {}  # routed, per system
        self._caught_up: dict[SystemStreamPartition, float] = {}  # `TaskInstance.caught_up`
        self._codec = RecordCodec(config)
        self._policies = ErrorPolicies(config, self._codec)
        self.restored = 0
        self._restored_tasks: dict[str, int] = {}  # `WorkerReport.restored_tasks`
        self._task_epochs: dict[str, int] = {}  # `WorkerReport.task_epochs`
        self._restored_ends: dict[str, int] = {}  # `WorkerReport.restored_ends`
        self.restore_modes: dict[str, str] = {}  # "task/store" -> none | delta | full
        # errors.process_policy skip/dead-letter: per task, the journal that undoes a
        # failed process() call's store writes.
        self._journals: dict[str, list[tuple[TaskStore, bytes, object, object]]] = {}
        self._adding: dict[str, asyncio.Future[Adding]] = {}
        """Tasks added in place whose stores are being opened and restored."""
        self._coordinator: CoordinatorReader | None = None
        self._newer: asyncio.Future[InPlaceChange | str] | None = None
        """The newer model a fence announced, read aside while the tasks go on (no commit
        until it is taken: `_take_newer_model`)."""
        self._fenced: FencedError | None = None
        self._undecodable: UndecodableRecordError | None = None
        """The record ``policy = "fail"`` stopped at: raised once what preceded it is
        committed."""
        self._fence_check: tuple[int, asyncio.Future[None]] | None = None
        """The loop's fence check in flight (`FENCE_CHECK_S`), answered aside, and the epoch
        it asks about (an answer for an epoch the worker has left since is dropped)."""
        self._releasing: dict[str, TaskInstance] = {}
        """Tasks a newer model let go: closed and no longer read, their stores open until
        the commit carrying their last writes lands (`_finish_releases`)."""
        self._release_ticket: int | None = None
        """The number of that commit once started (`Committer.landed`)."""
        """Follows the coordinator stream for newer models (opened with the systems)."""
        self._closed = False
        self.busy: Busy | None = None
        """The call in progress, for the task watchdog (`framework.worker.watchdog`)."""
        self.metrics = WorkerMetrics(config, worker_id)
        self.queries: QueryServer | None = None
        """The query endpoint (`framework.queries`), with ``[queries] enabled``."""

    async def run(self) -> WorkerResult:
        """Open everything, loop until stopped, commit and close; returns a summary."""
        try:
            task_class = load_task_class(self.config)  # a bad job.task fails before any I/O
            self._task_class = task_class
            await self._open_systems()
            if self.go is not None and not await self._wait_for_go():
                return WorkerResult(0, 0, 0, 0, 0, "not needed")
            started_ms = _now_ms()
            model = await self._load()
            await self.metrics.attach(self, model.epoch, started_ms)
            # Issue 49 hook: the query endpoint answers for the tasks in `instances`.
            self.queries = await start_queries(self.config, self,
                                               self.systems[self.config.metadata_system])
            try:
                committer = await self._start_tasks(model, task_class)
            except RestoreStopped as stopped:
                return await self._stopped_restoring(model, started_ms, stopped)
            await self.metrics.resumed()
            report = self._task_restores(WorkerReport(
                epoch=model.epoch, pid=os.getpid(), started_ms=started_ms,
                resumed_ms=_now_ms(), restored=self.restored,
                restore_modes=self.restore_modes, tasks=[i.name for i in self.instances],
                store_positions=_store_positions(committer)))
            self._report_base = report
            await self._report(report)
            with tuned_collector():
                reason = await self._loop(committer)
            if self._undecodable is not None:
                reason = "a record it cannot decode"
            report = self._report_base
            result = WorkerResult(report.epoch, sum(i.processed for i in self.instances),
                                  sum(i.skipped for i in self.instances), committer.commits,
                                  self.restored, reason)
            await self._report(replace(
                report, stopped_ms=_now_ms(), reason=reason, processed=result.processed,
                skipped=result.skipped, store_positions=_store_positions(committer)))
            if self._undecodable is not None:
                raise self._undecodable
            return result
        except StoreCorruptedError as error:
            await self._close()  # closed first: then wipe it for a full restore
            heal_damaged_store(self.config, error)
            raise StoreError(f"{error}; wiped {error.path}: the next start of this worker "
                             f"restores it fully from its changelog") from error
        finally:
            await self._close()

    async def _stopped_restoring(self, model: JobModel, started_ms: int,
                                 stopped: RestoreStopped) -> WorkerResult:
        """Stopped (SIGTERM, expansion) while restoring: exit now instead of finishing the
        restore; what was applied stays, so the next start restores only the rest."""
        self.restored += stopped.applied
        log.info("worker %d stopped while restoring: %s", self.worker_id, stopped)
        reason = "stopped while restoring"
        await self._report(WorkerReport(
            epoch=model.epoch, pid=os.getpid(), started_ms=started_ms, stopped_ms=_now_ms(),
            reason=reason, restored=self.restored, restore_modes=self.restore_modes,
            restore_stopped=RestoreStop(stopped.label, stopped.position, stopped.end),
            tasks=[i.name for i in self.instances]))
        return WorkerResult(model.epoch, 0, 0, 0, self.restored, reason)

    def _task_restores(self, report: WorkerReport) -> WorkerReport:
        """``report`` with `WorkerReport.restored_tasks`, `task_epochs` and `restored_ends`
        of the tasks this worker runs."""
        running = {i.name for i in self.instances}
        return replace(report, restored_tasks={
            t: n for t, n in self._restored_tasks.items() if t in running}, task_epochs={
            t: e for t, e in self._task_epochs.items() if t in running}, restored_ends={
            t: e for t, e in self._restored_ends.items() if t in running})

    async def _check_fence(self) -> None:
        """`FencedError` once this worker's epoch is no longer the job's current one."""
        assert self.model is not None
        await self.systems[self.config.metadata_system].check_fence(self.config.name,
                                                                    self.model.epoch)

    async def _report(self, report: WorkerReport) -> None:
        await publish_worker_report(self.systems[self.config.metadata_system], self.config,
                                    self.worker_id, report)

    async def _open_systems(self) -> None:
        names = {self.config.metadata_system} | {
            self.config.stream(s).system
            for s in (*self.config.inputs, *self.config.broadcast_inputs)}
        for name in sorted(names):
            system = open_system(self.config.system(name))
            await system.start()
            self.systems[name] = system
        self._coordinator = CoordinatorReader(self.systems[self.config.metadata_system],
                                              self.config)

    async def _wait_for_go(self) -> bool:
        """Whether the prepared worker is to run: ``go()``, unless stopped first."""
        assert self.go is not None
        told = asyncio.ensure_future(self.go())
        stopped = asyncio.ensure_future(self.stop.wait())
        try:
            await asyncio.wait((told, stopped), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
        if not told.done():
            told.cancel()
            return False
        return told.result()

    async def _load(self) -> JobModel:
        assert self._coordinator is not None
        model = self.model or await self._coordinator.latest_model()
        if model is None:
            raise JobModelError(
                f"job {self.config.name!r} has no job model yet in "
                f"{self.config.coordinator_stream}; start the job with `sampan run "
                f"{self.config.path}` (it publishes the model and starts workers)")
        if model.config_digest != self.config.digest:
            raise JobModelError(
                f"the job model of epoch {model.epoch} was built from another version of "
                f"{self.config.path}; restart the coordinator (`sampan run`) so it publishes "
                f"a model for this config")
        ids = model.worker_ids()
        if self.worker_id not in ids:
            raise JobModelError(
                f"worker {self.worker_id} is not part of epoch {model.epoch}, which has "
                f"workers {', '.join(map(str, ids))}")
        self.model = model
        return model

    async def _start_tasks(self, model: JobModel, task_class: type[StreamTask]) -> Committer:
        meta = self.systems[self.config.metadata_system]
        await begin_commits(self.config, self.worker_id, meta)  # EOS: fence, then read
        checkpoints = await meta.read_checkpoints(self.config.name)
        self._limits = model.read_limits()
        changelog_positions: dict[tuple[str, str], int] = {}
        for task_model in model.tasks_of(self.worker_id):
            checkpoint = checkpoints.get(task_model.name)
            opened = await open_task_stores(self.config, task_model, checkpoint, meta,
                                            stop=self.stop.is_set,
                                            still_current=self._check_fence)
            changelog_positions.update(
                {(task_model.name, s): p for s, p in opened.positions.items()})
            await self._run_task(task_model, checkpoint, opened, task_class)
        self._route()
        return Committer(
            self.config, self.systems, self._codec, model.epoch,
            {t.name: t.changelog_partition for t in model.tasks.values()}, changelog_positions)

    async def _run_task(self, task_model: TaskModel, checkpoint: Checkpoint | None,
                        opened: OpenedStores, task_class: type[StreamTask],
                        start: dict[SystemStreamPartition, int] | None = None) -> None:
        """Add ``task_model``'s instance over its opened stores, initialised (the caller
        routes its input); ``start``: its inputs' start positions when already read."""
        self.restored += opened.restored
        self._restored_tasks[task_model.name] = opened.restored
        self._task_epochs[task_model.name] = self.model.epoch if self.model else 0
        self._restored_ends[task_model.name] = sum(opened.positions.values())
        self.restore_modes.update({f"{task_model.name}/{s}": m
                                   for s, m in opened.modes.items()})
        instance = TaskInstance(
            task_model.name, task_class(), task_model.ssps | task_model.broadcast,
            opened.stores, self.config,
            start if start is not None else await start_positions(
                self.config, self.systems, task_model, checkpoint))
        self.instances.append(instance)  # closed with the worker even if init fails
        try:
            await instance.init()
        except PermanentError:
            raise  # e.g. an undeclared store: every restart would fail alike; the job stops
        except Exception as error:
            raise ProcessingError(
                f"task {task_model.name!r}: init() raised {describe(error)}; fix the "
                f"task's init and restart") from error
        if self.config.errors.process_policy != "fail":
            journal: list[tuple[TaskStore, bytes, object, object]] = []
            for store in instance.stores.values():
                if isinstance(store, TaskStore):
                    store.journal = journal
            self._journals[instance.name] = journal
        if task_model.stages:
            self._stages[task_model.name] = list(task_model.stages)

    def _route(self) -> None:
        """Which instances read each SSP; held SSPs wait behind their barrier."""
        routes: dict[SystemStreamPartition, list[TaskInstance]] = defaultdict(list)
        for instance in self.instances:
            held = frozenset().union(*(s.held for s in self._stages.get(instance.name, ())))
            for ssp in sorted(instance.ssps):
                if ssp not in held:
                    routes[ssp].append(instance)
        self._routes = dict(routes)
        for instance in self.instances:
            instance.caught_up = self._caught_up
        for ssp in [ssp for ssp in self._caught_up if ssp not in self._routes]:
            del self._caught_up[ssp]  # behind a barrier again (or gone): not idle
        reading: dict[str, list[SystemStreamPartition]] = defaultdict(list)
        for ssp in self._routes:
            reading[ssp.system].append(ssp)
        self._reading = {name: tuple(ssps) for name, ssps in reading.items()}
        by_system: dict[str, dict[SystemStreamPartition, int]] = defaultdict(dict)
        for ssp, readers in self._routes.items():
            position = min(r.positions[ssp] for r in readers)
            limit = self._limits.get(ssp)
            if limit is None or (position < limit and ssp not in self._at_limit):
                by_system[ssp.system][ssp] = position
        self._approaching = {ssp for positions in by_system.values() for ssp in positions
                             if ssp in self._limits}
        counts: dict[str, dict[str, int]] = defaultdict(dict)
        holds = self.model.holds if self.model else {}
        for qualified, count in (self.model.partition_counts if self.model else {}).items():
            hold = holds.get(qualified)
            if hold is not None and not hold.exact:
                continue  # held where the coordinator saw it grow (Kafka): read up to there
            system, stream = StreamRef.parse(qualified)
            counts[system][stream] = count
        for name in sorted(set(by_system) | set(self._consumers)):
            positions = by_system.get(name, {})
            if name not in self._consumers:
                self._consumers[name] = self.systems[name].consumer()
            self._consumers[name].assign(positions)
            # A stream that grew after this model is read only up to where it grew (the
            # local log) or where the consumer noticed it grew (Kafka).
            self._consumers[name].expect_partition_counts(counts[name])

    def _below_limit(self, ssp: SystemStreamPartition,
                     records: Sequence[FetchedRecord]) -> Sequence[FetchedRecord]:
        """The records of a held input's SSP before its limit; reaching past it marks the
        SSP so it is no longer read (the consumer moved on: it is reassigned)."""
        limit = self._limits[ssp]
        if not records or records[-1].offset < limit:
            return records
        self._at_limit.add(ssp)
        offsets = records.offsets if isinstance(records, FetchedColumns) else [
            r.offset for r in records]
        return records[:bisect_left(offsets, limit)]

    def _limits_reached(self) -> bool:
        """Whether an assigned SSP of a held input was read up to its limit."""
        return any(ssp in self._at_limit or min(
            r.positions[ssp] for r in self._routes[ssp]) >= self._limits[ssp]
            for ssp in self._approaching)

    def _release_barriers(self) -> bool:
        """Release, in order, the barrier stages whose older partitions were read far enough."""
        released = False
        for instance in self.instances:
            stages = self._stages.get(instance.name)
            while stages and stages[0].passed(instance.positions):
                stage = stages.pop(0)
                log.info("task %s passed its expansion barrier; consuming %s",
                         instance.name, counted(len(stage.held), "new partition"))
                released = True
            if stages is not None and not stages:
                del self._stages[instance.name]
        if released:
            self._route()
        return released

    async def _loop(self, committer: Committer) -> str:
        prefetched: dict[str, asyncio.Future[Batch]] = {}
        watchdog = TaskWatchdog(lambda: self.busy, self.config.task_timeout_ms / 1000)
        watchdog.start()
        try:
            return await self._run_loop(committer, prefetched)
        finally:
            watchdog.stop()
            for name in list(self._adding):
                await self._drop_task(name, committer)
            await committer.abandon()  # leaving on an error: let a write in flight finish
            for future in prefetched.values():
                future.cancel()
            await asyncio.gather(*prefetched.values(), return_exceptions=True)
            for aside in (self._newer, self._fence_check and self._fence_check[1]):
                if aside is not None:
                    aside.cancel()
                    await asyncio.gather(aside, return_exceptions=True)
            self._fence_check = None

    async def _run_loop(
        self,
        committer: Committer,
        prefetched: dict[str, asyncio.Future[Batch]],
    ) -> str:
        interval = self.config.commit_interval_ms / 1000
        window_interval = self.config.window_interval_ms / 1000
        next_commit = time.monotonic() + interval
        next_window = time.monotonic() + window_interval
        next_fence_check = time.monotonic() + FENCE_CHECK_S
        max_records = self.config.fetch_max_records
        track_idle = self.config.input_idle_timeout_ms > 0
        dirty = False
        self._release_barriers()
        while True:
            if not self._consumers:  # a worker without tasks: idle, but hear SIGTERM
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stop.wait(), 0.05)
            read = False
            for name, consumer in self._consumers.items():
                fetch = fetcher(consumer)
                pending = prefetched.pop(name, None)
                if pending is not None:
                    batch = await pending
                else:
                    batch = await fetch(max_records, 50 if not self.stop.is_set() else 0)
                if batch and not self._stages and not self._approaching and (
                        not self._adding and not self.stop.is_set()):
                    # Read the next batch while this one is processed; never across a
                    # barrier release, a held input's limit or a task added in place,
                    # which reassign the consumer.
                    prefetched[name] = asyncio.ensure_future(fetch(max_records, 50))
                if track_idle:
                    self._note_caught_up(name, batch)
                for ssp, records in batch.items():
                    if ssp in self._limits:
                        records = self._below_limit(ssp, records)
                        if not records:
                            continue
                    try:
                        await self._dispatch(ssp, records)
                    except UndecodableRecordError as error:  # commit what came before it
                        self._undecodable = self._undecodable or error
                        self.stop.set()
                    dirty = dirty or bool(records)
                    read = True
            if self._adding:
                await self._admit_tasks(committer)
            if self._approaching and self._limits_reached():
                self._route()
            if self._stages and self._release_barriers():
                dirty = True
            if self._newer is not None and (self._newer.done() or self.stop.is_set() or any(
                    i.commit_requested or i.buffers_full() or i.shutdown_requested
                    for i in self.instances)):  # read aside; a commit due waits for it
                await self._take_newer_model(committer, prefetched)
            now = time.monotonic()
            fenced = self._newer is not None  # no commit or fence check until it is taken
            if not fenced and self._fence_check is None and (now >= next_fence_check or (
                    not read  # a stale worker stops without having to commit
                    and now >= next_fence_check - FENCE_CHECK_S + FENCE_CHECK_IDLE_S)):
                # asked aside: the tasks go on while the metadata system answers
                assert self.model is not None
                self._fence_check = (self.model.epoch,
                                     asyncio.ensure_future(self._check_fence()))
                next_fence_check = now + FENCE_CHECK_S
            if self._fence_check is not None and self._fence_check[1].done():
                (asked_at, answered), self._fence_check = self._fence_check, None
                if self.model is None or asked_at == self.model.epoch:  # else: moot, the
                    await self._unless_newer(answered, committer, prefetched)  # model moved
                elif not answered.cancelled():
                    answered.exception()  # retrieved: asyncio would log it as never read
            if now >= next_window:
                for instance in self.instances:
                    self.busy = Busy("window", (instance,))
                    await instance.window()
                self.busy = None
                next_window = now + window_interval
                dirty = dirty or any(i.outputs or i.raw_outputs or i.buffered_writes()
                                     for i in self.instances)
            full = any(i.buffers_full() for i in self.instances)
            wanted = full or any(i.commit_requested for i in self.instances)
            stopping = self.stop.is_set() or any(i.shutdown_requested for i in self.instances)
            if self._newer is not None:
                continue  # fenced: commits wait until the newer model is taken
            releasing = bool(self._releasing) and self._release_ticket is None
            due = (dirty and (now >= next_commit or wanted)) or releasing
            if due and committer.in_flight and not (stopping or full):
                pass  # the next commit is prepared once this one landed: the tasks go on
            elif due or (stopping and dirty):
                dirty = not await self._start_commit(committer, prefetched)
                next_commit = time.monotonic() + interval
            elif committer.written:  # a failed commit stops the worker now
                await self._unless_newer(committer.settle(), committer, prefetched)
            if self._releasing:
                await self._finish_releases(committer)
            if stopping:
                await self._unless_newer(committer.settle(), committer, prefetched)
                if self._newer is not None:  # the last commit was refused: write it again
                    await self._take_newer_model(committer, prefetched)
                    await committer.settle()
                await self._finish_releases(committer)
                for instance in self.instances:
                    await instance.close()
                return "stopped" if self.stop.is_set() else "task requested shutdown"

    def _note_caught_up(self, system: str, batch: Batch) -> None:
        """Remember since when each read SSP of ``system`` has come back empty from every
        fetch (a fetch serves every partition with records: it is read to its end)."""
        now = time.monotonic()
        caught_up = self._caught_up
        for ssp in self._reading.get(system, ()):
            if batch.get(ssp):
                caught_up.pop(ssp, None)
            elif ssp not in caught_up:
                caught_up[ssp] = now

    async def _unless_newer(self, step: Awaitable[None], committer: Committer,
                            prefetched: dict[str, asyncio.Future[Batch]]) -> bool:
        """Run ``step`` (a fence check or a commit); when a newer job model fenced it,
        start reading that model aside (the loop takes it once read: `_take_newer_model`)
        or, for a worker that runs only the model it was given, stop. True when the step
        went through without a fence."""
        assert self.model is not None
        try:
            await step
        except FencedError as fenced:
            if not self.in_place:
                log.warning("worker %d of epoch %d fenced: a newer job model exists; "
                            "stopping without committing (it runs the model it was given: "
                            "it restarts on the new one)", self.worker_id, self.model.epoch)
                raise
            self._fenced = fenced
            if self._newer is None:
                self._newer = asyncio.ensure_future(self._newer_change())
            return False
        return True

    async def _take_newer_model(self, committer: Committer,
                                prefetched: dict[str, asyncio.Future[Batch]]) -> None:
        """Go on under the newer model a fence announced (`_newer`) when the worker can
        take it in place (`in_place_change`): a commit the fence refused is written again
        at the new epoch, tasks let go are closed and committed, tasks that gain
        partitions are committed and initialised again seeing them (stores stay open),
        tasks added start restoring; the rest never stop. Otherwise the fence's error is
        raised: the worker stops without committing and its supervisor starts it on the
        new model."""
        assert self.model is not None and self._task_class is not None
        assert self._newer is not None and self._fenced is not None
        newer, fenced = self._newer, self._fenced
        self._newer = self._fenced = None
        began = time.monotonic()
        closed: set[str] = set()
        reading = committing = 0.0  # seconds: how long each step held the loop (the log)
        for attempt in range(3):  # the model may move on again while this one is taken
            step = time.monotonic()
            change = await (newer if attempt == 0 else self._newer_change())
            reading += time.monotonic() - step
            if isinstance(change, str):
                log.warning("worker %d of epoch %d fenced: a newer job model exists; "
                            "stopping without committing (%s)", self.worker_id,
                            self.model.epoch, change)
                raise fenced
            for instance in self.instances:  # a task let go closes first: its last
                if instance.name in change.dropped and instance.name not in closed:
                    closed.add(instance.name)  # writes and outputs are committed
                    await instance.close()
            step = time.monotonic()
            renews = bool(change.gained)
            try:  # what is renewed is committed now; tasks let go at the next commit
                await committer.retry_at(change.model.epoch, wait=renews)
                if renews:
                    instances = self._to_commit()
                    await committer.start(instances)
                    if len(instances) > len(self.instances):
                        self._release_ticket = committer.prepared
                    await committer.settle()
            except FencedError as again:
                fenced = again
                continue
            finally:
                committing += time.monotonic() - step
            break
        else:
            raise fenced
        for instance in self.instances:  # closed for a model that moved on again
            if instance.name in closed - set(change.dropped):
                await instance.renew(self._task_class(), {})
        if not self._reads_as_before(change):
            for future in prefetched.values():  # read at the old assignment: read again
                future.cancel()
            await asyncio.gather(*prefetched.values(), return_exceptions=True)
            prefetched.clear()
        await self._apply_in_place(change, began, committer,
                                   f"model read {reading * 1000:.0f} ms, commits "
                                   f"{committing * 1000:.0f} ms")

    def _reads_as_before(self, change: InPlaceChange) -> bool:
        """Whether this worker reads its inputs under ``change.model`` exactly as now:
        the same tasks, partitions, barriers, limits and expected partition counts (a
        rebalance moving tasks of other workers only): no consumer is reassigned."""
        assert self.model is not None
        model, current = change.model, self.model
        return not (change.gained or change.added or change.dropped) and (
            model.partition_counts == current.partition_counts
            and model.read_limits() == self._limits and dict(model.holds) == dict(current.holds)
            and all(model.tasks[i.name].stages == current.tasks[i.name].stages
                    for i in self.instances))

    async def _newer_change(self) -> InPlaceChange | str:
        """`in_place_change` to the latest model; the fence moves before the model is
        written, so a model not there yet is waited for (up to `MODEL_WAIT_S`)."""
        assert self.model is not None and self._coordinator is not None
        deadline = time.monotonic() + MODEL_WAIT_S
        while True:
            latest = await self._coordinator.latest_model()
            if (latest is not None and latest.epoch > self.model.epoch) or (
                    time.monotonic() > deadline):
                return in_place_change(self.model, latest, self.worker_id, self.config.digest)
            await asyncio.sleep(0.1)

    async def _apply_in_place(self, change: InPlaceChange, began: float,
                              committer: Committer, steps: str) -> None:
        """Run ``change.model`` from now on: tasks let go, new partitions, barriers and
        counts; tasks added start restoring aside (`_admit_tasks` runs them); report."""
        assert self._task_class is not None and self._report_base is not None
        reads_as_before = self._reads_as_before(change)
        model = change.model
        previous, self.model = self.model, model
        for name in change.dropped:
            if change.gained:  # committed with the tasks renewed
                await self._drop_task(name, committer)
            else:
                await self._release(name)
        if self._releasing.keys() & set(change.added):  # given back before it was let go
            await self._release_now(committer)
        for instance in self.instances:
            gained = change.gained.get(instance.name)
            if gained:
                task_model = model.tasks[instance.name]
                start = await start_positions(self.config, self.systems, replace(
                    task_model, ssps=gained, broadcast=frozenset()), None)
                try:
                    await instance.renew(self._task_class(), start)
                except PermanentError:
                    raise
                except Exception as error:
                    raise ProcessingError(
                        f"task {instance.name!r}: init() raised {describe(error)} when it "
                        f"gained partitions in epoch {model.epoch}; fix the task's init and "
                        "restart") from error
            stages = model.tasks[instance.name].stages
            if stages:
                self._stages[instance.name] = list(stages)
            else:
                self._stages.pop(instance.name, None)
        for name in change.added:
            if name not in self._adding:
                self._adding[name] = asyncio.ensure_future(self._open_added(model.tasks[name]))
        limits, self._limits = self._limits, model.read_limits()
        self._at_limit = {s for s in self._at_limit if limits.get(s) == self._limits.get(s)}
        if not reads_as_before:
            self._release_barriers()
            self._route()
        self.in_place_changes += 1
        took_ms = int((time.monotonic() - began) * 1000)
        done = [f"task {t} +{counted(len(s), 'partition')}"
                for t, s in sorted(change.gained.items())]
        done += [f"task {t} let go" for t in change.dropped]
        done += [f"task {t} added" for t in change.added]
        done += [f"{'hold' if s in model.holds else 'release'} {s}"
                 for s in sorted(set(model.holds) ^ set(previous.holds if previous else {}))]
        log.info("worker %d took job model epoch %d in place (was %d) in %d ms (%s): %s",
                 self.worker_id, model.epoch, previous and previous.epoch, took_ms, steps,
                 ", ".join(done) or "nothing changes here")
        # resumed once the added tasks run (`_admit_tasks`)
        self._report_base = self._task_restores(replace(
            self._report_base, epoch=model.epoch,
            resumed_ms=None if self._adding else _now_ms(), restored=0,
            in_place_ms=took_ms,
            in_place_changes=self.in_place_changes,
            tasks=[i.name for i in self.instances],
            store_positions=_store_positions(committer)))
        if self._releasing:  # reported once let go: the host hands them over then
            await self.metrics.new_epoch(model.epoch)
        else:
            await asyncio.gather(self.metrics.new_epoch(model.epoch),
                                 self._report(self._report_base))

    async def _release(self, name: str) -> None:
        """Stop running task ``name`` (closed by the caller) but keep its stores open
        until the next commit, which carries its last writes, lands."""
        instance = await self._unroute(name)
        if instance is None:
            return
        self._releasing[name] = instance
        self._release_ticket = None  # the next commit carries it

    def _to_commit(self) -> list[TaskInstance]:
        """The instances the next commit takes: the running ones, and the tasks let go
        until one commit carrying them started (no later commit may write them)."""
        if self._releasing and self._release_ticket is None:
            return [*self.instances, *self._releasing.values()]
        return self.instances

    async def _start_commit(self, committer: Committer,
                            prefetched: dict[str, asyncio.Future[Batch]]) -> bool:
        """`Committer.start` of `_to_commit` (through `_unless_newer`): True when it went
        through without a fence; a commit that carries tasks let go is their ticket."""
        instances = self._to_commit()
        before = committer.prepared
        went = await self._unless_newer(committer.start(instances), committer, prefetched)
        if len(instances) > len(self.instances) and committer.prepared > before:
            self._release_ticket = committer.prepared
        return went

    async def _finish_releases(self, committer: Committer) -> None:
        """Close the stores of the tasks let go once their last commit landed; then report
        the model (the host hands those tasks over once every worker reported it)."""
        if not self._releasing or self._release_ticket is None or (
                committer.landed < self._release_ticket):
            return
        for name, instance in self._releasing.items():
            for key in [k for k in committer.positions if k[0] == name]:
                del committer.positions[key]
            _close_stores(instance)
        log.info("worker %d let go of %s (committed)", self.worker_id,
                 ", ".join(f"task {n}" for n in sorted(self._releasing)))
        self._releasing, self._release_ticket = {}, None
        assert self._report_base is not None
        self._report_base = self._task_restores(replace(
            self._report_base, resumed_ms=None if self._adding else _now_ms(),
            tasks=[i.name for i in self.instances],
            store_positions=_store_positions(committer)))
        await self._report(self._report_base)

    async def _release_now(self, committer: Committer) -> None:
        """Commit the tasks let go now and close their stores (one is taken back)."""
        if self._release_ticket is None:
            await committer.start(self._to_commit())
            self._release_ticket = committer.prepared
        await committer.settle()
        await self._finish_releases(committer)

    async def _cancel_adding(self, name: str) -> None:
        """Stop adding task ``name`` if it is being added; close what it opened."""
        adding = self._adding.pop(name, None)
        if adding is not None:  # still restoring: its stores close as it is cancelled
            adding.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                opened = await adding  # it had finished: close what it opened
                for store in opened[1].stores.values():
                    store.close()

    async def _unroute(self, name: str) -> TaskInstance | None:
        """Stop running task ``name`` here (an addition in progress is cancelled): its
        instance, no longer routed or committed, if it ran."""
        await self._cancel_adding(name)
        instance = next((i for i in self.instances if i.name == name), None)
        if instance is not None:
            self.instances.remove(instance)
            self._journals.pop(name, None)
            self._stages.pop(name, None)
        return instance

    async def _drop_task(self, name: str, committer: Committer) -> None:
        """Let task ``name`` go (closed and committed by the caller): close its stores."""
        instance = await self._unroute(name)
        if instance is None:
            return
        for key in [k for k in committer.positions if k[0] == name]:
            del committer.positions[key]
        _close_stores(instance)

    async def _open_added(self, task_model: TaskModel) -> Adding:
        """Open and restore the stores of a task added in place, and read where its inputs
        start, beside the running tasks (whose loop then only initialises and routes it)."""
        meta = self.systems[self.config.metadata_system]
        checkpoint = (await meta.read_checkpoints(self.config.name)).get(task_model.name)
        opened = await open_task_stores(self.config, task_model, checkpoint, meta,
                                        stop=self.stop.is_set)
        try:
            start = await start_positions(self.config, self.systems, task_model, checkpoint)
        except BaseException:
            for store in opened.stores.values():
                store.close()
            raise
        return checkpoint, opened, start

    async def _admit_tasks(self, committer: Committer) -> None:
        """Run the added tasks whose stores are restored; report once none is left."""
        assert self.model is not None and self._task_class is not None
        admitted = False
        for name, opening in list(self._adding.items()):
            if not opening.done():
                continue
            del self._adding[name]
            checkpoint, opened, start = opening.result()
            committer.positions.update({(name, s): p for s, p in opened.positions.items()})
            await self._run_task(self.model.tasks[name], checkpoint, opened,
                                 self._task_class, start)
            log.info("worker %d runs task %s (added in epoch %d; %d changelog records "
                     "restored)", self.worker_id, name, self.model.epoch, opened.restored)
            admitted = True
        if admitted:
            self._route()
        if admitted and not self._adding and not self._releasing and (
                self._report_base is not None):
            self._report_base = self._task_restores(replace(
                self._report_base, resumed_ms=_now_ms(), restored=self.restored,
                restore_modes=self.restore_modes, tasks=[i.name for i in self.instances],
                store_positions=_store_positions(committer)))
            await self._report(self._report_base)

    async def _dispatch(self, ssp: SystemStreamPartition,
                        records: Sequence[FetchedRecord]) -> None:
        readers = self._routes.get(ssp, ())
        self.busy = Busy("process", readers, ssp)  # what the task watchdog looks at
        started = time.perf_counter()
        try:
            if len(readers) == 1 and not self._journals:
                dispatch = dispatch_one if readers[0].process_batch is None else dispatch_batch
                await dispatch(readers[0], ssp, records, self._codec, self._policies)
            else:
                await dispatch_many(readers, ssp, records, self._codec, self._policies,
                                    self._journals)
        finally:
            self.busy = None
        self.metrics.batch_done(readers, len(records), time.perf_counter() - started)

    async def _close(self) -> None:
        """Close everything (once); a failure to close is logged, never masks the error
        that stopped the worker."""
        if self._closed:
            return
        self._closed = True
        if self.queries is not None:  # issue 49 hook: first, so nothing reads closed stores
            await _closing(self.queries.close(), "the query endpoint")
        await self.metrics.close()
        if self._coordinator is not None:
            await _closing(self._coordinator.close(), "the coordinator stream's reader")
        for consumer in self._consumers.values():
            await _closing(consumer.close(), "a consumer")
        for instance in [*self.instances, *self._releasing.values()]:
            _close_stores(instance)
        for system in self.systems.values():
            await _closing(system.close(), f"system {system.name!r}")

