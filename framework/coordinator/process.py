"""The coordinator (`sampan run`): publish job models, supervise workers, watch partitions.

Data flows one way: config + partition counts + previous model → the model service
(`framework.coordinator.model_service`: detection, decision, one build per model) →
coordinator stream → workers. On an input expansion it publishes the next model with
expansion barriers, which the running workers take in place (or, with ``model_changes =
"restart"``, it stops them and starts them on the new epoch); a change its tasks cannot
map (decrease, non-multiple) holds that input (`framework.coordinator.holds`) and the job
runs on. Its lifecycle is a `framework.coordinator.phase.CoordinatorPhase`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framework.cancel import cancel_and_wait
from framework.config import JobConfig
from framework.config.snapshot import job_file_change, snapshot_config
from framework.coordinator.decision import PartitionDecision
from framework.coordinator.early import worker_supervisor
from framework.coordinator.expansion_book import ExpansionBook
from framework.coordinator.lease import CoordinatorLease, LeaseLostError, LeaseStore
from framework.coordinator.model_service import ModelChange, ModelService
from framework.coordinator.modes import refuse_other_mode
from framework.coordinator.phase import COORDINATOR_TRANSITIONS, CoordinatorPhase, run_state
from framework.coordinator.reachability import Reachability
from framework.coordinator.retention import retain_forever, retention_policies
from framework.coordinator.runfile import (
    RunRecord,
    metadata_location,
    read_run_file,
    run_file,
    shared_folder,
    write_run_file,
)
from framework.coordinator.supervisor import Supervisor
from framework.errors import SampanError, StreamNotFoundError, SystemUnavailableError
from framework.inputs_check import InputRecreatedError, check_inputs
from framework.lifecycle import Lifecycle
from framework.metadata import (
    ConfigChange,
    CoordinatorStatus,
    RunState,
    ensure_coordinator_stream,
    publish_status,
    read_state,
)
from framework.metadata.jobmodel import JobModel
from framework.metrics import CoordinatorMetrics
from framework.systems.base import StartsProducer, System
from framework.worker.commit import check_guarantee
from groupers import SystemStreamPartition

if TYPE_CHECKING:  # imported where used: a job on the local log never loads aiokafka
    from framework.coordinator.kafka_lease import KafkaCoordinatorLease

__all__ = ["Coordinator"]

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


async def _side_by_side(*calls: Awaitable[Any]) -> list[Any]:
    """The results of ``calls``, awaited concurrently; the first error cancels the others
    and is raised, as awaiting them one after another would."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            if not task.done():
                await cancel_and_wait(task, "a start-up step beside one that failed")


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_mtime_ns, found.st_size


class Coordinator:
    """One job's coordinator; `run` returns when ``stop`` is set (or raises on a crash loop)."""

    def __init__(
        self, config: JobConfig, *, stop: asyncio.Event | None = None,
        log_dir: Path | None = None, start_workers: bool = True,
        supervisor: Supervisor | None = None,
    ) -> None:
        """``supervisor``: one whose workers `sampan run` started already, waiting for go
        (`framework.coordinator.early`), built with ``stop``."""
        self.config = config
        self.stop = stop or asyncio.Event()
        self.lifecycle = Lifecycle(f"coordinator of job {config.name!r}",
                                   CoordinatorPhase.CREATED, COORDINATOR_TRANSITIONS)
        self.supervisor = supervisor or worker_supervisor(config, log_dir, self.stop)
        self.supervisor.on_exit = self._worker_down
        self.start_workers = start_workers
        self._job_file_stat: tuple[int, int] | None = None  # (mtime_ns, size) last looked at
        self.lease: CoordinatorLease | KafkaCoordinatorLease | None = None
        self._lease_lost = asyncio.Event()
        self.model: JobModel | None = None
        self.status = CoordinatorStatus()
        self.expansions = ExpansionBook(self.status)
        self.metrics = CoordinatorMetrics(config)
        self.reach = Reachability(self.status, self._reachability_changed)
        self.service = ModelService(config, watch=self.reach.watch)
        self.run_file = run_file(config.state_dir)
        self._started_ms = _now_ms()
        self._unpublished = False
        """The status changed while the metadata system could not take it."""

    @property
    def phase(self) -> CoordinatorPhase:
        return self.lifecycle.state

    @property
    def systems(self) -> dict[str, System]:
        """The clients of the job's systems (the model service's)."""
        return self.service.systems

    @property
    def meta(self) -> System:
        return self.service.meta

    async def run(self) -> None:
        """Publish the model, start workers, then monitor until stopped."""
        failed: BaseException | None = None
        keeper: asyncio.Task[None] | None = None
        compactor: asyncio.Task[None] | None = None
        retainer: asyncio.Task[None] | None = None
        try:
            self.lifecycle.to(CoordinatorPhase.STARTING)
            await self.open_systems()
            await check_guarantee(self.config, self.meta)  # exactly-once needs transactions
            if self.supervisor.config_snapshot is None:  # else written with the early workers
                self.supervisor.config_snapshot = snapshot_config(self.config)
            ttl = self.config.coordinator.lease_timeout_ms
            if self.start_workers:  # unless `sampan run` started them: they start up
                await self.supervisor.prepare(self.config.workers)  # while the lease is taken
            hosts_timeout = self.config.coordinator.session_timeout_ms
            if isinstance(self.meta, LeaseStore):
                self.lease = CoordinatorLease(self.meta, self.config.name, ttl)
                await refuse_other_mode(self.meta, self.config.name, "one-host", hosts_timeout)
            else:  # Kafka: the lease is membership of the job's coordinators' group
                from framework.coordinator.kafka_lease import KafkaCoordinatorLease

                await _side_by_side(  # a topic made, a group looked up: independent
                    ensure_coordinator_stream(self.meta, self.config),
                    refuse_other_mode(self.meta, self.config.name, "one-host", hosts_timeout))
                self.lease = KafkaCoordinatorLease(
                    self.meta, self.config.name,
                    self.config.coordinator_ref.stream, ttl)
            if self.lease is not None:
                asked = time.monotonic()
                await self.lease.acquire()  # before anything is written: one coordinator
                log.info("holds the lease of job %r (%s, %.0f ms)", self.config.name,
                         "local log" if isinstance(self.lease, CoordinatorLease)
                         else f"{self.lease.protocol} group protocol",
                         (time.monotonic() - asked) * 1000)
                await refuse_other_mode(self.meta, self.config.name, "one-host", hosts_timeout)
                keeper = asyncio.create_task(self.lease.keep(self._lease_lost))
                keeper.add_done_callback(self._stop_if_lease_lost)
            shared = shared_folder(read_run_file(self.run_file), self.config)
            if shared:
                log.warning("%s", shared)
            self._write_run_file()
            self._job_file_stat = _stat(self.config.path)
            # Independent round trips side by side: each is a wait for a broker.
            state, counts = await _side_by_side(read_state(self.meta, self.config),
                                                self.partition_counts())
            # Expansions carry over; a refusal, error or edit is re-detected by this run.
            self.status.expansions = state.status.expansions
            self.metrics.serve(self)
            await _side_by_side(self._check_inputs(),  # before any worker starts reading
                                self.create_declared_streams(), self._start_producers())
            self.model = await self._start_model(counts, state.model)
            if self.start_workers:
                await self.supervisor.start(self.model.workers)
            self.lifecycle.to(CoordinatorPhase.RUNNING)
            if self.config.coordinator.compaction_interval_ms:
                compactor = asyncio.create_task(self._compact_forever())
            if self.config.coordinator.retention_interval_ms and retention_policies(
                    self.config):
                retainer = asyncio.create_task(retain_forever(self.config, self.systems))
            await self._monitor()
            if self._lease_lost.is_set():
                raise LeaseLostError(
                    f"job {self.config.name!r}: this coordinator could not renew its lease "
                    f"within {self.config.coordinator.lease_timeout_ms} ms and another one "
                    f"took the job over; its workers were stopped")
        except BaseException as error:
            failed = error
            raise
        finally:
            self.lifecycle.to(CoordinatorPhase.STOPPING)
            for background, what in ((keeper, "the lease keeper"),
                                     (compactor, "the compactor"),
                                     (retainer, "the retention pass")):
                if background is not None:  # its error is logged: never masks why we stop
                    await cancel_and_wait(background, what)
            await self.supervisor.stop()
            await self.supervisor.discard_prepared()
            self.metrics.close()
            if isinstance(failed, Exception):
                self.status.error = str(failed)
            self.lifecycle.to(CoordinatorPhase.FAILED if isinstance(failed, Exception)
                              else CoordinatorPhase.STOPPED)
            if self.lease is not None and self.lease.held:  # never overwrite another's status
                self._write_run_file()
                try:
                    await self._report()
                except SampanError as error:  # e.g. what stopped the job stops this too
                    log.log(logging.DEBUG if failed else logging.WARNING,
                            "could not record in the coordinator stream that the job "
                            "ended: %s", error)
            if self.lease is not None:
                await self.lease.release()
            await self.close_systems()

    async def _start_model(self, counts: dict[str, int], previous: JobModel | None) -> JobModel:
        """The first model of this run; counts changed while the job was down are applied
        as an expansion (with barriers) or hold the input (`framework.coordinator.holds`)."""
        detected = _now_ms()
        if previous is None:
            return await self.service.apply(counts, None, reason="coordinator start",
                                            now_ms=detected)
        change = await self.service.decide(previous, counts, now_ms=detected)
        decision = change.decision
        if self.expansions.note(decision, previous.epoch):
            await self._report()
        if not decision.expansion:
            return await self.service.apply(decision.counts, previous, change=change,
                                            reason="coordinator start", now_ms=_now_ms())
        log.info("input expansion while the job was stopped: %s", decision.expansion)
        model = await self.service.apply(
            decision.counts, previous, change=change, now_ms=_now_ms(),
            reason=f"coordinator start, expansion {decision.expansion}")
        self.expansions.applied(decision.expansion_record(model.epoch, detected,
                                                          published_ms=_now_ms()))
        return model

    async def open_systems(self) -> None:
        """Start a client of the metadata system and of every input's system."""
        await self.service.open()

    async def close_systems(self) -> None:
        """Close every system client `open_systems` (or a declared stream) started."""
        await self.service.close()

    def _all_inputs(self) -> list[str]:
        return self.service.inputs()

    async def partition_counts(self) -> dict[str, int]:
        """Current partition count of every input; creates declared-but-missing inputs."""
        return await self.service.partition_counts()

    async def _start_producers(self) -> None:
        """Connect every Kafka producer of the job now, so what a broker refuses (the
        idempotent producer on tansu) is said once per run, here; workers stay quiet."""
        for system in self.systems.values():
            if isinstance(system, StartsProducer):
                with self.reach.watch(system.name):
                    await system.start_producer()

    async def create_declared_streams(self) -> None:
        """Create every declared stream with ``partitions`` that does not exist yet (outputs)."""
        await self.service.create_declared_streams()

    async def _monitor(self) -> None:
        interval = self.config.coordinator.monitor_interval_ms / 1000
        self._announce_idle_workers()
        await self._report()
        while not self.stop.is_set():
            try:
                await asyncio.wait_for(self.stop.wait(), interval)
                break
            except TimeoutError:
                pass
            restarts = self.supervisor.restarts
            await self.supervisor.check()
            if self.supervisor.restarts != restarts:
                await self._report()
            await self._check_job_file()
            try:
                counts = await self.partition_counts()
                await self._check_inputs()
                await self._note_resumed()
            except SystemUnavailableError:  # logged once per outage; the job goes on
                too_long = self.reach.too_long(self.config.coordinator.max_unreachable_ms,
                                               self.config.systems, str(self.config.path))
                if too_long is not None:
                    raise too_long from None
                continue
            if self._unpublished:
                await self._report()
            assert self.model is not None
            if dict(counts) != dict(self.model.partition_counts) or self.model.holds:
                self.lifecycle.to(CoordinatorPhase.CHANGING_MODEL)
                await self._on_change(counts)
                self.lifecycle.to(CoordinatorPhase.RUNNING)
            elif self.expansions.clear_refusal(self.model.epoch):
                await self._report()

    async def _compact_forever(self) -> None:
        """Keep the job's compacted streams bounded: every `compaction_interval_ms`, drop
        superseded records of its changelogs and coordinator stream (a full restore then
        reads one record per key). Failures are logged and retried, never fatal."""
        interval = self.config.coordinator.compaction_interval_ms / 1000
        streams = [self.config.changelog_ref(s).stream
                   for s in self.config.logged_stores]
        streams.append(self.config.coordinator_ref.stream)
        while True:
            await asyncio.sleep(interval)
            if self.reach.down(self.config.metadata_system):
                continue  # its outage is reported already; compaction waits for its end
            for stream in streams:
                try:
                    dropped = await self.meta.compact(stream)
                except SampanError as error:
                    log.warning("compaction of %s failed (%s); retrying in %.0f s", stream,
                                error, interval)
                    continue
                if dropped:
                    log.info("compacted %s: dropped %d superseded records", stream, dropped)

    async def _check_inputs(self) -> None:
        """Refuse to go on when an input went back in time (`framework.inputs_check`).

        Checkpoints are read before the ends: workers commit meanwhile, and a checkpoint
        read after an end could be past it without anything having gone back.
        """
        with self.reach.watch(self.config.metadata_system):
            checkpoints = await self.meta.read_checkpoints(self.config.name)
        ends: dict[SystemStreamPartition, int] = {}
        for qualified in self._all_inputs():
            stream = self.config.stream(qualified)
            try:
                with self.reach.watch(stream.system):
                    ranges = await self.systems[stream.system].offsets(stream.stream)
            except StreamNotFoundError:
                continue
            ends.update({SystemStreamPartition(stream.system, stream.stream, p): r.end
                         for p, r in ranges.items()})
        try:
            check_inputs(self.config.path, checkpoints, ends)
        except InputRecreatedError as error:
            log.error("REFUSED: %s", error)
            raise

    async def _check_job_file(self) -> None:
        """Report an edit of the job file once: the job keeps running what it started with."""
        seen = _stat(self.config.path)
        if seen == self._job_file_stat:
            return
        self._job_file_stat = seen
        change = job_file_change(self.config)
        if change == (self.status.config_change.change if self.status.config_change else None):
            return
        if change is None:
            log.info("job file %s is back to the configuration the job runs", self.config.path)
            self.status.config_change = None
        else:
            log.warning("job file %s was edited while the job runs: %s. The job keeps running "
                        "the configuration it started with; restart `sampan run` to apply the "
                        "edit", self.config.path, change)
            self.status.config_change = ConfigChange(change=change, detected_ms=_now_ms())
        await self._report()

    async def _on_change(self, counts: dict[str, int]) -> None:
        """Apply an expansion its tasks map, or hold (or release) inputs: each a new model,
        taken by the running workers in place (`model_changes = "in-place"`), else
        published with the workers stopped."""
        assert self.model is not None
        change = await self.service.decide(self.model, counts, now_ms=_now_ms())
        decision = change.decision
        noted = self.expansions.note(decision, self.model.epoch)
        if not decision.changed:
            if noted:
                await self._report()
            return
        if self._in_place(decision):
            log.info("%s; the workers take it where they run (model_changes = in-place)",
                     decision.what)
            self.model = await self.service.apply(decision.counts, self.model, change=change,
                                                  in_place=True, reason=decision.what,
                                                  now_ms=_now_ms())
            self.expansions.applied(decision.expansion_record(
                self.model.epoch, change.detected_ms, published_ms=_now_ms(), in_place=True))
            await self._report()
            return
        await self._restart_on(change)

    async def _restart_on(self, change: ModelChange) -> None:
        """Publish ``change``'s model with the workers stopped, then start them on it."""
        assert self.model is not None
        decision = change.decision
        log.info("%s; stopping workers", decision.what)
        if self.start_workers:  # the next epoch's workers start up while these stop
            await self.supervisor.prepare(self.config.workers)
        await self.supervisor.stop()
        stopped = _now_ms()
        self.model = await self.service.apply(decision.counts, self.model,
                                              change=change.workers_stopped(),
                                              reason=decision.what, now_ms=_now_ms())
        published = _now_ms()
        if self.start_workers:
            await self.supervisor.start(self.model.workers)
        self.expansions.applied(decision.expansion_record(
            self.model.epoch, change.detected_ms, published_ms=published, stopped_ms=stopped,
            started_ms=_now_ms()))
        await self._report()

    def _in_place(self, decision: PartitionDecision) -> bool:
        """Whether the running workers take ``decision``'s model without a restart: an
        expansion, a hold placed or released (`framework.worker.in_place` checks the rest,
        task by task, and restarts a worker it does not fit)."""
        return self.config.coordinator.model_changes == "in-place" and decision.changed

    async def _report(self) -> None:
        """Publish the status (state and phase from the lifecycle); while the metadata
        system is unreachable it is published once it answers again (the outage itself is
        in the run file meanwhile)."""
        if not self.systems:
            return
        status = self.status
        status.state, status.epoch = run_state(self.phase), self.model.epoch if self.model else None
        status.phase = self.phase.name
        status.coordinator_pid, status.updated_ms = os.getpid(), _now_ms()
        status.coordinator_host = socket.gethostname()
        status.worker_logs = str(self.supervisor.log_dir)
        status.worker_pids, status.restarts = self.supervisor.pids(), self.supervisor.restarts
        status.stuck = self.supervisor.stuck
        status.crashes = self.supervisor.crash_reports()
        status.crash_window_ms = self.config.coordinator.crash_window_ms
        status.max_restarts = self.config.coordinator.max_worker_restarts
        status.idle_workers = self.model.idle_workers() if self.model else []
        try:
            with self.reach.watch(self.config.metadata_system):
                await publish_status(self.meta, self.config, status)
        except SystemUnavailableError:
            self._unpublished = True
            return
        self._unpublished = False

    def _stop_if_lease_lost(self, _keeper: asyncio.Task[None]) -> None:
        if self._lease_lost.is_set():
            self.stop.set()

    async def _worker_down(self) -> None:
        """A worker crashed and waits for its restart: say so now, not after the backoff."""
        await self._report()

    def _reachability_changed(self) -> None:
        self._unpublished = True
        self._write_run_file()

    def _write_run_file(self) -> None:
        """Who runs the job here and what it cannot reach (`framework.coordinator.runfile`)."""
        state: RunState = run_state(self.phase)
        try:
            write_run_file(self.run_file, RunRecord(
                pid=os.getpid(), host=socket.gethostname(), started_ms=self._started_ms,
                updated_ms=_now_ms(), state=state, metadata_system=self.config.metadata_system,
                unreachable=list(self.status.unreachable), job_file=str(self.config.path),
                metadata_at=metadata_location(self.config), error=self.status.error or ""))
        except OSError as error:  # for people; never stops the job
            log.warning("cannot write the run file %s: %s", self.run_file, error)

    def _announce_idle_workers(self) -> None:
        """More workers than tasks: say which stay idle and why (once per model)."""
        assert self.model is not None
        message = self.model.idle_workers_message()
        if message:
            log.warning("%s", message)

    async def _note_resumed(self) -> None:
        """Close the pause of this run's last expansion once every worker resumed on its
        epoch (`ExpansionRecord.pause_ms`, shown by status and the pause metric)."""
        if not self.status.expansions or self.model is None or not self.start_workers:
            return
        last = self.status.expansions[-1]
        if last.resumed_ms is not None or last.epoch != self.model.epoch or (
                last.detected_ms < self._started_ms):
            return
        with self.reach.watch(self.config.metadata_system):
            reports = (await read_state(self.meta, self.config)).workers
        resumed = [reports[w].resumed_ms for w in range(self.model.workers)
                   if w in reports and reports[w].epoch == last.epoch]
        if len(resumed) == self.model.workers and None not in resumed:
            last.resumed_ms = max(r for r in resumed if r is not None)
            log.info("expansion %s: every worker resumed on epoch %d; pause %d ms",
                     last.change, last.epoch, last.resumed_ms - last.detected_ms)
            await self._report()
