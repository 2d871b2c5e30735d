"""The worker loop: fetch a batch → process → window on schedule → commit on schedule,
asking the fence aside and taking a newer job model in place when one fenced it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from framework.api import StreamTask
from framework.config import JobConfig
from framework.inputs_check import start_positions
from framework.lifecycle import Lifecycle
from framework.metadata.jobmodel import JobModel, TaskModel
from framework.metrics import WorkerMetrics
from framework.systems.base import Checkpoint, EndsReader, System
from framework.worker.changes import ModelChanges
from framework.worker.commit import Committer, begin_commits
from framework.worker.dispatch import Batch, fetcher
from framework.worker.following import FENCE_CHECK_S, Following
from framework.worker.processing import Processing
from framework.worker.reports import Reports, now_ms
from framework.worker.routing import Routing
from framework.worker.scheduling import CommitSchedule, Next
from framework.worker.start_offsets import StartOffsets
from framework.worker.states import WorkerState
from framework.worker.task_stores import OpenedStores, open_task_stores
from framework.worker.tasks import Tasks
from framework.worker.watchdog import TaskWatchdog
from groupers import SystemStreamPartition

__all__ = ["WorkerLoop"]

log = logging.getLogger(__name__)


class WorkerLoop:
    """Starts one worker's tasks and runs them: its parts, composed."""

    def __init__(self, config: JobConfig, worker_id: int, systems: dict[str, System],
                 stop: asyncio.Event, lifecycle: Lifecycle[WorkerState], tasks: Tasks,
                 following: Following, reports: Reports, metrics: WorkerMetrics) -> None:
        self.config = config
        self.worker_id = worker_id
        self.stop = stop
        self.lifecycle = lifecycle
        self.tasks = tasks
        self.following = following
        self.reports = reports
        self.metrics = metrics
        self.routing = Routing(systems, config.expansion_merge_ms,
                               config.fetch_max_records * 10)
        self.processing = Processing(config, self.routing, tasks, metrics)
        self.schedule = CommitSchedule(config.commit_interval_ms / 1000, time.monotonic())
        self.changes = ModelChanges(config, systems, tasks, self.routing, self.schedule,
                                    following, self._released)

    @property
    def model(self) -> JobModel:
        assert self.following.model is not None
        return self.following.model

    async def start(self, task_class: type[StreamTask]) -> Committer:
        """Open, restore and initialise the tasks the model places here (`RestoreStopped`
        when stopped meanwhile); route them; the committer of their commits."""
        config, model, systems = self.config, self.model, self.routing.systems
        meta = systems[config.metadata_system]
        await begin_commits(config, self.worker_id, meta)  # EOS: fence, then read
        checkpoints = await meta.read_checkpoints(config.name)
        self.routing.set_limits(model.read_limits())
        changelog_positions: dict[tuple[str, str], int] = {}
        reads = StartOffsets(systems)  # one offsets read per stream for all the tasks
        for task_model in model.tasks_of(self.worker_id):
            checkpoint = checkpoints.get(task_model.name)
            opened = await open_task_stores(config, task_model, checkpoint, meta,
                                            stop=self.stop.is_set,
                                            still_current=self.following.check,
                                            offsets=reads.offsets)
            changelog_positions.update(
                {(task_model.name, s): p for s, p in opened.positions.items()})
            start = await start_positions(config, systems, task_model, checkpoint,
                                          reads.offsets)
            await self._run_task(task_model, checkpoint, opened, task_class, start)
        self.routing.route(self.tasks.instances, model)
        return Committer(
            config, systems, self.processing.codec, model.epoch,
            {t.name: t.changelog_partition for t in model.tasks.values()}, changelog_positions)

    async def run(self, committer: Committer, task_class: type[StreamTask]) -> str:
        """Loop until stopped (or a task asked to stop): why it stopped."""
        prefetched: dict[str, asyncio.Future[Batch]] = {}
        watchdog = TaskWatchdog(lambda: self.processing.busy,
                                self.config.task_timeout_ms / 1000)
        watchdog.start()
        try:
            return await self._loop(committer, task_class, prefetched)
        finally:
            watchdog.stop()
            for name in list(self.tasks.adding):
                await self.tasks.drop(name, committer)
                self.routing.forget(name)
            await committer.abandon()  # leaving on an error: let a write in flight finish
            for future in prefetched.values():
                future.cancel()
            await asyncio.gather(*prefetched.values(), return_exceptions=True)
            await self.following.stop()

    async def _loop(self, committer: Committer, task_class: type[StreamTask],
                    prefetched: dict[str, asyncio.Future[Batch]]) -> str:
        config, routing, tasks, following = self.config, self.routing, self.tasks, self.following
        instances = tasks.instances
        window_interval = config.window_interval_ms / 1000
        self.schedule.started(time.monotonic())
        next_window = time.monotonic() + window_interval
        following.next_check = time.monotonic() + FENCE_CHECK_S
        max_records = config.fetch_max_records
        track_idle = config.input_idle_timeout_ms > 0
        dirty = False
        merging = routing.merging
        prefetch_issued: dict[str, tuple[int, int]] = {}
        """System → the `Merging.ticket` of its batch in ``prefetched``."""
        ends_readers: dict[str, EndsReader | None] = {}
        """System → its consumer when that is an `EndsReader`, else None."""
        routing.release_barriers(instances, self.model)
        while True:
            if not routing.consumers:  # a worker without tasks: idle, but hear SIGTERM
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stop.wait(), 0.05)
            read = False
            for name, consumer in routing.consumers.items():
                fetch = fetcher(consumer)
                pending = prefetched.pop(name, None)
                if pending is not None:
                    batch = await pending
                    ticket = prefetch_issued.pop(name)
                else:
                    ticket = merging.ticket(now_ms())
                    batch = await fetch(max_records, 50 if not self.stop.is_set() else 0)
                if name not in ends_readers:  # a Protocol check per consumer, not per fetch
                    ends_readers[name] = consumer if isinstance(consumer, EndsReader) else None
                ends = ends_readers[name]
                probes = ends is not None
                if batch and not routing.stages and not routing.approaching and (
                        not merging.paused and not (probes and merging.pending)
                        and not tasks.adding and not self.stop.is_set()):
                    # Read the next batch while this one is processed; never across a
                    # barrier release, a held input's limit, a paused new partition or a
                    # task added in place, which reassign the consumer; nor while new
                    # partitions wait for a consumer's ends (`_probe_ends`).
                    prefetch_issued[name] = merging.ticket(now_ms())
                    prefetched[name] = asyncio.ensure_future(fetch(max_records, 50))
                if track_idle:
                    routing.note_caught_up(name, batch)
                if merging.merges and not probes:
                    merging.observed(routing.assigned.get(name, ()), batch,
                                     sum(map(len, batch.values())) >= max_records, ticket)
                for ssp, records in batch.items():
                    if ssp in routing.limits:
                        records = routing.below_limit(ssp, records)
                        if not records:
                            continue
                    read = True
                    if ssp in merging.merges:  # waits for the old partitions (merging.py)
                        merging.hold(ssp, records, self._position(ssp), ticket[0])
                        continue
                    if not await self.processing.dispatch(ssp, records):
                        self.stop.set()  # commit what came before the undecodable record
                    if ssp in merging.sources:
                        merging.processed(ssp, records)
                    dirty = dirty or bool(records)
                if ends is not None and merging.pending and name not in prefetched:
                    await self._probe_ends(name, ends, batch)
            if merging.pending:
                dirty = await self._merged() or dirty
            if merging.reroute:
                routing.route(instances, self.model)
            if tasks.adding:
                await self._admit_tasks(committer, task_class)
            if routing.approaching and routing.limits_reached():
                routing.route(instances, self.model)
            if routing.stages and routing.release_barriers(instances, self.model):
                dirty = True
            if following.due(self.stop.is_set() or any(  # a commit due waits for it
                    i.commit_requested or i.buffers_full() or i.shutdown_requested
                    for i in instances)):
                await self._take_newer_model(committer, task_class, prefetched)
            now = time.monotonic()
            following.ask(now, read)
            answered = following.answer()
            if answered is not None:
                await following.unless_newer(answered)
            if now >= next_window:
                await self.processing.window(instances)
                next_window = now + window_interval
                dirty = dirty or any(i.outputs or i.raw_outputs or i.buffered_writes()
                                     for i in instances)
            full = any(i.buffers_full() for i in instances)
            wanted = full or any(i.commit_requested for i in instances)
            stopping = self.stop.is_set() or any(i.shutdown_requested for i in instances)
            if following.newer is not None:
                continue  # fenced: commits wait until the newer model is taken
            step = self.schedule.next(now, dirty=dirty, wanted=wanted, full=full,
                                      stopping=stopping, in_flight=committer.in_flight,
                                      written=committer.written)
            if step is Next.START:
                dirty = not await self.schedule.start(committer, instances,
                                                      following.unless_newer)
                self.schedule.started(time.monotonic())
            elif step is Next.SETTLE:  # a failed commit stops the worker now
                await following.unless_newer(committer.settle())
            if self.schedule.releasing:
                await self._finish_releases(committer)
            if stopping:
                await following.unless_newer(committer.settle())
                if following.newer is not None:  # the last commit was refused: write it again
                    await self._take_newer_model(committer, task_class, prefetched)
                    await committer.settle()
                await self._finish_releases(committer)
                self.lifecycle.to(WorkerState.STOPPING)
                for instance in instances:
                    await instance.close()
                return "stopped" if self.stop.is_set() else "task requested shutdown"

    async def _merged(self) -> bool:
        """Process the new partitions' waiting records the old ones were read far enough
        for (`framework.worker.merging`): whether any was."""
        merging, any_processed = self.routing.merging, False
        for ssp, records in merging.ready():
            if not await self.processing.dispatch(ssp, records):
                self.stop.set()
            if ssp in merging.sources:
                merging.processed(ssp, records)
            any_processed = True
        return any_processed

    async def _probe_ends(self, system: str, consumer: EndsReader, batch: Batch) -> None:
        """While new partitions' records wait, ask ``consumer`` which of the old partitions
        they wait for it has read to their end (none of theirs in ``batch``, nothing of the
        system fetched ahead): a fetch of it cannot say (`framework.systems.base.EndsReader`)."""
        merging = self.routing.merging
        if not any(ssp.system == system for ssp in merging.pending):
            return
        idle = [s for s in self.routing.assigned.get(system, ())
                if s in merging.sources and s not in batch and not merging.pending.get(s)]
        if idle:
            ticket = merging.ticket(now_ms())
            merging.read_to_end(await consumer.read_to_end(idle), ticket)

    def _position(self, ssp: SystemStreamPartition) -> int:
        """The next offset of ``ssp`` its slowest reader processes."""
        return min((r.positions.get(ssp, 0) for r in self.routing.routes.get(ssp, ())),
                   default=0)

    async def _take_newer_model(self, committer: Committer, task_class: type[StreamTask],
                                prefetched: dict[str, asyncio.Future[Batch]]) -> None:
        """Take the newer model a fence announced in place (`ModelChanges.take`; or stop
        fenced), then report it: resumed once the tasks added run (`_admit_tasks`)."""
        taken = await self.changes.take(self.model, committer, task_class, prefetched)
        model = self.following.model = taken.change.model
        self.changes.taken += 1
        log.info("worker %d took job model epoch %d in place (was %d) in %d ms (%s): %s",
                 self.worker_id, model.epoch, taken.previous.epoch, taken.took_ms,
                 taken.steps, taken.summary)
        releasing = bool(self.schedule.releasing)  # reported once let go: the host
        await asyncio.gather(self.metrics.new_epoch(model.epoch), self.reports.update(
            committer, send=not releasing, epoch=model.epoch,  # hands them over then
            resumed_ms=None if self.tasks.adding else now_ms(), restored=0,
            in_place_ms=taken.took_ms, in_place_changes=self.changes.taken))
        self.lifecycle.to(WorkerState.RUNNING)

    async def _finish_releases(self, committer: Committer) -> None:
        """Close the tasks let go once their last commit landed (`CommitSchedule`)."""
        await self._released(self.schedule.finish_releases(committer), committer)

    async def _released(self, names: list[str], committer: Committer) -> None:
        """Report the model once the tasks ``names`` let go were closed (the host hands
        them over once every worker reported it)."""
        if names:
            log.info("worker %d let go of %s (committed)", self.worker_id,
                     ", ".join(f"task {n}" for n in names))
            await self.reports.update(committer,
                                      resumed_ms=None if self.tasks.adding else now_ms())

    async def _run_task(self, task_model: TaskModel, checkpoint: Checkpoint | None,
                        opened: OpenedStores, task_class: type[StreamTask],
                        start: dict[SystemStreamPartition, int] | None = None) -> None:
        """Run ``task_model`` over its opened stores (`Tasks.run_task`) behind its barriers
        (the caller routes its input)."""
        await self.tasks.run_task(task_model, self.model.epoch, checkpoint, opened,
                                  task_class, start)
        self.routing.set_stages(task_model.name, task_model.stages)
        self.routing.resume_merges(task_model)

    async def _admit_tasks(self, committer: Committer, task_class: type[StreamTask]) -> None:
        """Run the added tasks whose stores are restored; report once none is left."""
        model, admitted = self.model, False
        for name, (checkpoint, opened, start) in self.tasks.ready():
            committer.positions.update({(name, s): p for s, p in opened.positions.items()})
            start = await self.tasks.completed_start(model.tasks[name], checkpoint, start)
            await self._run_task(model.tasks[name], checkpoint, opened, task_class, start)
            log.info("worker %d runs task %s (added in epoch %d; %d changelog records "
                     "restored)", self.worker_id, name, model.epoch, opened.restored)
            admitted = True
        if admitted:
            self.routing.route(self.tasks.instances, model)
        if admitted and not self.tasks.adding and not self.schedule.releasing and (
                self.reports.last is not None):
            await self.reports.update(committer, resumed_ms=now_ms(),
                                      restored=self.tasks.restored,
                                      restore_modes=self.tasks.restore_modes)
