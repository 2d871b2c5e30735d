"""One host of a job spread over several hosts (`sampan run JOB --host NAME`).

It keeps its membership of the job's group (`membership`), leads rebalances when Kafka
makes it the leader (`leader`), runs the tasks the model places on it with its own
supervised worker processes (`framework.coordinator.supervisor`), keeps its standby and
warmup copies current (`replicas`), asks for probing rebalances while warmups restore and
for a rebalance when an input's partition count changes (of every input, on every
system: the model service's detection), and reports to the coordinator stream
(`HostReport`, key ``host/<name>``). Its lifecycle is a `framework.hosts.phase.HostPhase`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Collection, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from aiokafka.errors import KafkaError

from framework.config import JobConfig
from framework.coordinator.lease import pid_alive
from framework.coordinator.model_service import ModelService
from framework.coordinator.modes import refuse_other_mode
from framework.coordinator.supervisor import Supervisor
from framework.errors import SampanError
from framework.hosts.config import lead_timeout_ms, rebalance_timeout_ms, rebalance_wait_bound_ms
from framework.hosts.errors import DuplicateHostError
from framework.hosts.fault import LeaderHold, RoundAbandoned, session_timeout_ms
from framework.hosts.handover import pending_releases
from framework.hosts.leader import change_in_place, incremental_rebalances, lead
from framework.hosts.lock import HostLock
from framework.hosts.member import Answer, Member, StorePosition
from framework.hosts.membership import Membership
from framework.hosts.pause import close_pause
from framework.hosts.phase import HOST_TRANSITIONS, HostPhase
from framework.hosts.placement import RUNNING
from framework.hosts.ports import claim_base_port
from framework.hosts.replicas import Replicas
from framework.hosts.reporting import HostReporter
from framework.lifecycle import Lifecycle
from framework.metadata import (
    CoordinatorReader,
    ensure_coordinator_stream,
    publish_model,
)
from framework.metadata.jobmodel import JobModel
from framework.metrics import HostMetrics
from framework.queries.hook import start_standby_reads
from framework.stores import RocksDBEngine, store_path
from framework.systems import open_system
from framework.systems.base import System
from framework.worker.commit import check_guarantee
from framework.worker.task_stores import rocksdb_options

if TYPE_CHECKING:
    from framework.queries.standby import StandbyServer

__all__ = ["Host"]

PAUSE_CHECK_S = 1.0
"""How often the leader looks whether every host resumed after an expansion."""
FOLLOW_UP_CHECK_S = 0.25
"""How often the leader looks whether the tasks its first model parked were let go."""
PARKED_GRACE_S = 30.0
"""How long a host that is not the leader waits for the follow-up of a model parking tasks
before it asks for a rebalance (the leader that owed it is gone)."""
IN_PLACE_GRACE_S = 10.0
"""How long a host that is not the leader leaves a count change to the leader (which
applies an expansion in place) before it asks for a rebalance itself."""
_ENDING = (HostPhase.STOPPING, HostPhase.STOPPED, HostPhase.FAILED)
"""Phases a host only leaves for its end (`Host._move` moves nothing from them)."""

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


class Host:
    """Runs host ``name`` of the job until ``stop`` is set (or a duplicate name refuses it)."""

    def __init__(self, config: JobConfig, name: str, *, stop: asyncio.Event | None = None,
                 log_dir: Path | None = None) -> None:
        self.config = config
        self.name = name
        self.stop = stop or asyncio.Event()
        self.lifecycle = Lifecycle(f"host {name!r} of job {config.name!r}", HostPhase.CREATED,
                                   HOST_TRANSITIONS, self._phase_changed)
        self.machine = socket.gethostname()
        self.since_ms = _now_ms()
        coordinator = config.coordinator
        self.supervisor = Supervisor(
            config.path, log_dir=log_dir or config.state_dir / "logs", tee=log_dir is None,
            stop_timeout_s=coordinator.worker_stop_timeout_ms / 1000,
            restart_backoff_s=coordinator.worker_restart_backoff_ms / 1000,
            max_restarts=coordinator.max_worker_restarts,
            crash_window_s=coordinator.crash_window_ms / 1000, command=self._worker_command,
            restart_fenced=self._runs_current_model)
        self.model: JobModel | None = None
        self.metrics = HostMetrics(config, name)
        self.replicas: Replicas | None = None
        self.refused: SampanError | None = None
        self._lock = asyncio.Lock()
        self._meta: System | None = None
        self._service: ModelService | None = None
        self._coordinator: CoordinatorReader | None = None
        self._membership: Membership | None = None
        self._rejoin_at: float | None = None
        self._next_monitor = 0.0
        self._asked: dict[str, int] | None = None  # the counts of the last rebalance asked for
        self._pause_epoch: int | None = None  # the leader's epoch whose pause may be open
        self._next_pause_check = 0.0
        self._reporter: HostReporter | None = None
        self._incarnation = 0
        self._waiting_since: float | None = None
        self._hold = LeaderHold()
        self._counts_seen: float | None = None  # when this host saw counts its model lacks
        self._follow_up: tuple[JobModel, JobModel] | None = None
        """The leader's first model of an incremental rebalance and the target it publishes
        once the parked tasks are let go (`framework.hosts.handover`)."""
        self._next_follow_up = 0.0
        self._parked_asked: int | None = None  # the epoch whose parked tasks we asked about
        self._leading: tuple[str, dict[str, Member]] | None = None
        """The round this host leads: its id and hosts (the model is built after it)."""
        self._renew_member = False
        self._awaiting: tuple[str, float] = ("", 0.0)
        """In `HostPhase.AWAITING_MODEL`: the round whose model this host waits for, and
        until when."""
        self._incremental = incremental_rebalances(config)

    @property
    def phase(self) -> HostPhase:
        return self.lifecycle.state

    def _phase_changed(self, _before: HostPhase, after: HostPhase) -> None:
        if self._reporter is not None:
            self._reporter.phase(after.name)

    def _move(self, phase: HostPhase) -> None:
        """Move to ``phase`` unless the host is stopping: once it is, what still finishes
        (a round's answer arriving as it leaves) runs without changing its phase."""
        if self.phase not in _ENDING:
            self.lifecycle.to(phase)

    def _between_rounds(self) -> bool:
        """Neither in a rebalance nor waiting for its model: the current model decides."""
        assert self._membership is not None
        return not self._membership.in_round and self.phase is not HostPhase.AWAITING_MODEL

    # worker processes ----------------------------------------------------------------------
    def _model_file(self) -> Path:
        assert self.model is not None
        return self.config.state_dir / "run" / f"model-{self.model.epoch}.json"

    def _write_model_file(self) -> None:
        """The model workers (re)started from now on run (atomically replaced)."""
        assert self.model is not None
        path = self._model_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_bytes(self.model.to_bytes())
        os.replace(temporary, path)

    async def _follow_in_place(self) -> None:
        """Take a model published for the running workers to take in place (an expansion
        the leader applied without a rebalance): workers restarted from now on run it, and
        the report and the pause follow it. Its workers take it by themselves."""
        assert self._meta is not None and self.model is not None
        if not self._between_rounds():  # the round brings its model
            return
        latest = await self._reader().latest_model()
        if latest is None or latest.epoch <= self.model.epoch or latest.in_place_since is None \
                or latest.in_place_since > self.model.epoch:
            return
        previous, self.model = self.model, latest
        self._write_model_file()
        ids = latest.hosts.get(self.name, ())
        log.info("host %r: epoch %d taken in place by its %d worker(s): %s", self.name,
                 latest.epoch, len(ids), latest.reason)
        await self.supervisor.stop_ids([w for w in self.supervisor.workers if w not in ids])
        if self._replicas_of(previous) != self._replicas_of(latest):
            await self._start_replicas(latest)
        await self._start_missing()
        assert self._reporter is not None and self._membership is not None
        await self._reporter.in_place(latest, previous, self._active(latest))
        self._note_pause(latest)

    def _note_pause(self, model: JobModel) -> None:
        """The leader closes the pause of the expansion at ``model``'s epoch, or of an
        earlier one still open that ``model`` was taken in place from (`close_pause`)."""
        assert self._membership is not None
        if not self._membership.leader:
            self._pause_epoch = None
        elif self._pause_epoch is None or model.in_place_since is None or (
                model.in_place_since > self._pause_epoch):
            self._pause_epoch = model.epoch

    def _active(self, model: JobModel) -> list[str]:
        ids = model.hosts.get(self.name, ())
        return sorted(t.name for t in model.tasks.values() if t.worker in ids)

    def _replicas_of(self, model: JobModel) -> tuple[list[str], list[str]]:
        """The tasks this host keeps standby and warmup copies of in ``model``."""
        return (sorted(t for t, hosts in model.standbys.items() if self.name in hosts),
                sorted(t for t, hosts in model.warmups.items() if self.name in hosts))

    async def _start_replicas(self, model: JobModel) -> None:
        if self.replicas is not None:
            await self.replicas.stop()
        standby, warmup = self._replicas_of(model)
        assert self._meta is not None
        self.replicas = Replicas(self.config, self._meta,
                                 {t: model.tasks[t] for t in (*standby, *warmup)})
        self.replicas.start()

    async def _runs_current_model(self, worker_id: int) -> bool:
        """Whether this host's model is the job's current one and places ``worker_id`` here
        (a worker fenced by a model this host has not applied yet waits for it) and no
        rebalance is under way (its model decides: an eager one stopped the workers)."""
        if self.model is None or worker_id not in self.model.hosts.get(self.name, ()):
            return False
        if self._membership is None or not self._between_rounds():
            return False
        assert self._meta is not None
        return await self._meta.fenced_epoch(self.config.name) == self.model.epoch

    async def _start_missing(self) -> None:
        """Start this host's workers of the current model that do not run (new ids, or
        fenced ones that waited for the model)."""
        if self.model is None:
            return
        missing = [w for w in self.model.hosts.get(self.name, ())
                   if w not in self.supervisor.workers]
        if missing and await self._runs_current_model(missing[0]):
            await self.supervisor.start_ids(missing)

    def _worker_command(self, worker_id: int) -> list[str]:
        return ["framework.hosts.worker", str(self.config.path), "--worker", str(worker_id),
                "--data-dir", str(self.config.data_dir), "--model", str(self._model_file())]

    # the run -------------------------------------------------------------------------------
    async def run(self) -> None:
        """Join the group and run what the models place here until stopped."""
        self.lifecycle.to(HostPhase.STARTING)
        lock = HostLock(self.config.state_dir, self.config.name, self.name)
        lock.acquire()  # a second host on this state folder stops here, touching nothing
        try:
            port = claim_base_port(self.config, self.name)  # a fixed port: one host a machine
            try:
                self.metrics.serve(self, port)  # on the claimed port, when fixed
                await self._run()
            finally:
                self.metrics.close()
                if port is not None:
                    port.close()
        finally:
            lock.release()

    def _reader(self) -> CoordinatorReader:
        """The host's follower of the coordinator stream (open while the host runs)."""
        assert self._coordinator is not None
        return self._coordinator

    async def _run(self) -> None:
        failed: BaseException | None = None
        standby_reads: StandbyServer | None = None
        self._meta = meta = open_system(self.config.system(self.config.metadata_system))
        await meta.start()
        self._coordinator = coordinator = CoordinatorReader(meta, self.config)
        self._service = service = ModelService(self.config)
        try:
            await check_guarantee(self.config, meta)
            await ensure_coordinator_stream(meta, self.config)
            await service.open()  # every input's system: detection and the leader's models
            self.model = await coordinator.latest_model()
            self._reporter = HostReporter(self.config, meta, coordinator, self.name,
                                          self.machine, self.phase.name, self.metrics.port)
            configured = self.config.coordinator.session_timeout_ms
            session = session_timeout_ms(configured)  # fault injection may lengthen it
            # queries hook (framework.queries.standby): standby reads of this host's copies
            standby_reads = await start_standby_reads(self.config, self, meta)
            self._membership = Membership(
                meta, self.config.name, self.config.coordinator_ref.stream, self._member({}),
                lead=self._lead, revoked=self._revoked, assigned=self._assigned,
                session_timeout_ms=session, heartbeat_interval_ms=max(300, configured // 4),
                rebalance_timeout_ms=rebalance_timeout_ms(self.config))
            lease_timeout = max(6000, self.config.coordinator.lease_timeout_ms)
            await refuse_other_mode(meta, self.config.name, "hosts", lease_timeout)
            await self._membership.join()
            await refuse_other_mode(meta, self.config.name, "hosts", lease_timeout)
            log.info("host %r joined group of job %r (session timeout %d ms)", self.name,
                     self.config.name, session)
            while not self.stop.is_set():
                try:
                    with contextlib.suppress(TimeoutError):  # hear SIGTERM in a rebalance
                        await asyncio.wait_for(self._membership.poll(), 1)
                except KafkaError:
                    if self.stop.is_set():  # a round this host abandoned as it stops
                        break
                    raise
                await self._membership.settle()  # the round's answer, heartbeats going on
                if self.refused is not None:
                    raise self.refused
                await self._bound_rebalance_wait()
                async with self._lock:
                    await self.supervisor.check()
                    await self._tick()
        except BaseException as error:
            failed = error
            raise
        finally:
            self.lifecycle.to(HostPhase.STOPPING)
            async with self._lock:
                if self._reporter is not None and self.supervisor.pids():
                    with contextlib.suppress(Exception):  # for people: never blocks a stop
                        await self._reporter.revoked(True)
                await self._stop_running()
            if self._membership is not None:
                await self._membership.leave()
            self.lifecycle.to(HostPhase.FAILED if isinstance(failed, Exception)
                              else HostPhase.STOPPED)
            if self._reporter is not None and not isinstance(failed, DuplicateHostError):
                with contextlib.suppress(Exception):
                    await self._reporter.finish("failed" if isinstance(failed, Exception)
                                                else "stopped", failed)
            if standby_reads is not None:  # queries hook
                await standby_reads.close()
            await service.close()
            await coordinator.close()
            await meta.close()

    async def _stop_running(self) -> None:
        await self.supervisor.stop()
        if self.replicas is not None:
            await self.replicas.stop()
            self.replicas = None

    # rebalance callbacks -------------------------------------------------------------------
    async def _revoked(self) -> Member:
        """Tell what state lies here: an eager rebalance stops workers and replicas first;
        an incremental one only the replicas (workers go on, their tasks current)."""
        async with self._lock:
            self._follow_up = None  # the new round starts from the model now current
            self._move(HostPhase.REBALANCING)
            running: set[str] = set()
            if self._incremental:
                log.info("host %r: rebalance: workers go on; stopping replicas", self.name)
                if self.replicas is not None:
                    await self.replicas.stop()
                    self.replicas = None
                running = self._running_tasks()
            else:
                log.info("host %r: rebalance: stopping workers and replicas", self.name)
                if self._reporter is not None:
                    await self._reporter.revoked(bool(self.supervisor.pids()))
                await self._stop_running()
                log.info("host %r: stopped; rejoining", self.name)
            return self._member(self._positions(running))

    def _running_tasks(self) -> set[str]:
        """Tasks this host's running workers process (incremental: current copies)."""
        if self.model is None or not self._incremental:
            return set()
        ids = set(self.supervisor.pids())
        return {t.name for t in self.model.tasks.values() if t.worker in ids}

    def _member(self, positions: dict[str, dict[str, StorePosition]]) -> Member:
        return Member(self.name, self.config.workers, os.getpid(), self.machine,
                      self.since_ms, positions, self._incarnation)

    async def _bound_rebalance_wait(self) -> None:
        """A host waiting in one rebalance longer than `rebalance_wait_bound_ms` gives up
        its member and joins as a new one (a round whose leader vanished never ends)."""
        assert self._membership is not None
        if not self._membership.waiting:
            self._waiting_since = None
            return
        now = time.monotonic()
        if self._waiting_since is None:
            self._waiting_since = now
            return
        bound = rebalance_wait_bound_ms(self.config)
        if now - self._waiting_since < bound / 1000:
            return
        log.warning("host %r has waited %.0f s in a rebalance without an assignment (bound "
                    "%d ms, coordinator.max_rebalance_wait_ms): its round's leader is gone or "
                    "stuck; giving up its group member and joining again as a new member",
                    self.name, now - self._waiting_since, bound)
        self._waiting_since = None
        self._incarnation += 1
        await self._membership.rejoin_as_new(self._member(self._positions()))

    def _positions(self, running: Collection[str] = ()) -> dict[str, dict[str, StorePosition]]:
        """Task → logged store → (changelog partition, offset) of every local copy; the
        ``running`` tasks' copies are open in their workers: current (`RUNNING`)."""
        positions: dict[str, dict[str, StorePosition]] = {}
        if self.model is None:
            return positions
        for task in running:
            partition = self.model.tasks[task].changelog_partition
            positions[task] = {store: (partition, RUNNING)
                               for store in self.config.logged_stores}
        for task in self.model.tasks:
            if task in running:
                continue
            for store in self.config.logged_stores:
                if self.config.store(store).type != "rocksdb" or not store_path(
                        self.config.state_dir, store, task).exists():
                    continue
                try:
                    engine = RocksDBEngine.open(self.config.state_dir, store, task,
                                                options=rocksdb_options(self.config.store(store)))
                except SampanError as error:
                    log.warning("cannot read local copy of store %r of task %r: %s", store,
                                task, error)
                    continue
                try:
                    position = engine.changelog_position()
                finally:
                    engine.close()
                if position is not None and position.stream == self.config.changelog_ref(
                        store).stream:
                    positions.setdefault(task, {})[store] = (position.partition,
                                                             position.offset)
        return positions

    def _lead(self, members: Mapping[str, Member]) -> dict[str, Answer]:
        """The leader's step (see `membership.Lead`): one member per host name, the oldest;
        the others are refused."""
        chosen: dict[str, tuple[str, Member]] = {}
        for member_id, member in sorted(  # the oldest process; its newest member
                members.items(), key=lambda m: (m[1].since_ms, m[1].pid, -m[1].incarnation,
                                                m[0])):
            chosen.setdefault(member.host, (member_id, member))
        answers: dict[str, Answer] = {}
        for member_id, member in members.items():
            holder_id, holder = chosen[member.host]
            if member_id != holder_id:
                answers[member_id] = Answer(
                    refused=f"job {self.config.name!r} already has a host named "
                    f"{member.host!r} (pid {holder.pid} on machine {holder.machine!r}); "
                    f"give this host another --host name, or stop that one first",
                    other=holder)
        hosts = {name: member for name, (_, member) in chosen.items()}
        try:
            self._hold(len(hosts))
        except RoundAbandoned:
            self.stop.set()
            raise  # aiokafka sends no SyncGroup: the round is left unanswered
        round_id = uuid.uuid4().hex
        self._leading = (round_id, hosts)  # the model is built once the round is over
        for member_id, _ in chosen.values():
            answers[member_id] = Answer(round_id=round_id)
        return answers

    async def _assigned(self, answer: Answer) -> None:
        async with self._lock:
            await self._apply(answer)

    async def _apply(self, answer: Answer) -> None:
        if answer.error:
            log.error("rebalance failed: %s; rejoining in 2 s", answer.error)
            self._rejoin_at = time.monotonic() + 2
            self._move(HostPhase.RUNNING)
            return
        if answer.refused:
            other = answer.other
            if other is not None and other.machine == self.machine and not pid_alive(other.pid):
                log.warning("host name %r is still held by pid %d, which is no longer running; "
                            "waiting for Kafka to expire it (up to %d ms)", self.name,
                            other.pid, self.config.coordinator.session_timeout_ms)
                self._rejoin_at = time.monotonic() + 1
                self._move(HostPhase.RUNNING)
                return
            self.refused = DuplicateHostError(answer.refused)  # the run loop fails with it
            return
        assert answer.round_id is not None
        await self._lead_or_wait(answer.round_id)

    async def _lead_or_wait(self, round_id: str) -> None:
        """After the round: its leader builds and publishes the model (its heartbeats go
        on meanwhile) and runs it; the others wait for it (`_await_round_model`)."""
        leading, self._leading = self._leading, None
        if self.model is not None and round_id == self.model.round_id:
            # No new round was held: the group answered this member's rejoin with the
            # current assignment (tansu does, unless its members change). A new member
            # changes them: the next pass rejoins as one.
            log.info("host %r: the group answered with the current round's assignment; "
                     "rejoining as a new member for a new round", self.name)
            self._renew_member = True
            self._move(HostPhase.RUNNING)
            return
        if leading is None or leading[0] != round_id:
            self._awaiting = (round_id, time.monotonic() + lead_timeout_ms(self.config) / 1000)
            self._move(HostPhase.AWAITING_MODEL)
            await self._await_round_model()
            return
        hosts = leading[1]
        assert self._service is not None
        self._move(HostPhase.BUILDING_MODEL)
        try:  # whatever happens, the round is over: the host runs what it has
            try:
                led = await asyncio.wait_for(
                    lead(self._service, hosts, f"hosts {', '.join(sorted(hosts))}", round_id),
                    lead_timeout_ms(self.config) / 1000)
            except Exception as error:
                log.error("leader: could not build the next job model (%r); asking for "
                          "another rebalance in 2 s", error)
                self._rejoin_at = time.monotonic() + 2
                return
            self._follow_up = (led.model, led.follow_up) if led.follow_up is not None else None
            self._next_follow_up = 0.0
            await self._run_model(led.model, led.probing)
        finally:
            self._move(HostPhase.RUNNING)

    async def _await_round_model(self) -> None:
        """Run the model the last round's leader publishes once it is there; ask for a
        rebalance when it does not come within the lead timeout (the leader is gone)."""
        if self.phase is not HostPhase.AWAITING_MODEL:
            return
        round_id, deadline = self._awaiting
        assert self._meta is not None and self._membership is not None
        latest = await self._reader().latest_model()
        if latest is not None and latest.round_id == round_id:
            try:
                await self._run_model(latest, False)
            finally:  # the model came: not waiting any more, whatever running it raised
                self._move(HostPhase.RUNNING)
        elif time.monotonic() > deadline:
            self._move(HostPhase.RUNNING)
            log.warning("host %r: the leader of the last rebalance published no model within "
                        "%d ms; asking for a rebalance", self.name, lead_timeout_ms(self.config))
            self._membership.rejoin()

    async def _run_model(self, model: JobModel, probing: bool) -> None:
        """Run ``model``, the model of a rebalance (``probing``: this host schedules the
        probing rebalance that follows)."""
        interval = self.config.coordinator.probing_rebalance_interval_ms / 1000
        if self.stop.is_set():  # stopped inside the round: its workers stopped, none start
            log.info("host %r is stopping: epoch %d starts no worker here (its tasks move "
                     "in the next rebalance)", self.name, model.epoch)
            return
        if self.model is not None and model.epoch <= self.model.epoch:  # followed already
            log.info("host %r: epoch %d of the rebalance is running here already (taken in "
                     "place)", self.name, model.epoch)
            self._rejoin_at = time.monotonic() + interval if probing else None
            self._note_pause(model)
            return
        previous, self.model = self.model, model
        ids = model.hosts.get(self.name, ())
        kept = bool(self.supervisor.workers) and previous is not None and (
            model.in_place_since is not None and model.in_place_since <= previous.epoch)
        if kept:  # the workers that stay take the model in place; the others stop
            await self.supervisor.stop_ids([w for w in self.supervisor.workers
                                            if w not in ids])
        else:  # a model to restart on
            await self.supervisor.stop()
        self._write_model_file()
        standby, warmup = self._replicas_of(model)
        await self._start_replicas(model)
        await self.supervisor.start_ids(ids)
        self._rejoin_at = time.monotonic() + interval if probing else None
        active = self._active(model)
        log.info("host %r: epoch %d: %d active task(s) on workers %s, %d standby, %d warmup%s%s",
                 self.name, model.epoch, len(active), list(ids), len(standby), len(warmup),
                 " (probing rebalance scheduled)" if probing else "",
                 f"; {len(model.parked)} task(s) parked until their hosts let them go"
                 if model.parked else "")
        assert self._reporter is not None and self._membership is not None
        await self._reporter.assigned(model, previous, ids, active, standby, warmup,
                                      leader=self._membership.leader, kept=kept)
        self._note_pause(model)

    # between rebalances --------------------------------------------------------------------
    async def _tick(self) -> None:
        assert self._membership is not None and self._reporter is not None
        now = time.monotonic()
        if self._renew_member:
            self._renew_member = False
            self._incarnation += 1
            await self._membership.rejoin_as_new(self._member(self._positions(
                self._running_tasks())))
            return
        if self._rejoin_at is not None and now >= self._rejoin_at and self.model is not None \
                and self.model.parked:  # a round now would park them again: probe after
            self._rejoin_at = now + self.config.coordinator.probing_rebalance_interval_ms / 1000
        if self._rejoin_at is not None and now >= self._rejoin_at:
            self._rejoin_at = None
            log.info("host %r asks for a rebalance (probing warmups or retrying)", self.name)
            self._membership.rejoin()
            return
        await self._await_round_model()
        await self._start_missing()
        await self._advance_follow_up()
        if self._parked_too_long():
            log.warning("host %r: epoch %d parks tasks %s and no follow-up places them (its "
                        "leader is gone); asking for a rebalance", self.name, self.model.epoch
                        if self.model else 0, ", ".join(sorted(self.model.parked))
                        if self.model else "")
            self._membership.rejoin()
            return
        await self._reporter.tick(self.replicas.gaps if self.replicas else {})
        if self._pause_epoch is not None and now >= self._next_pause_check:
            self._next_pause_check = now + PAUSE_CHECK_S
            assert self._meta is not None
            try:
                if await close_pause(self._reader(), self.config, self._pause_epoch):
                    self._pause_epoch = None
            except SampanError as error:
                log.warning("cannot record the expansion's pause yet (%s)", error)
        if now >= self._next_monitor and self.model is not None:
            self._next_monitor = now + self.config.coordinator.monitor_interval_ms / 1000
            assert self._service is not None
            try:
                await self._follow_in_place()
                counts = await self._service.partition_counts()
            except SampanError as error:
                log.warning("cannot read partition counts (%s)", error)
                return
            known = {s: self.model.partition_counts.get(s) for s in counts}
            held = all(s in self.model.holds for s in counts if counts[s] != known[s])
            if counts == known:
                self._counts_seen = None
            elif counts and await self._changed_in_place(held):
                return
            if counts and counts != known and not (held and counts == self._asked):
                log.info("input partition counts changed (%s → %s): rebalancing",
                         known, counts)
                self._asked = counts  # a held input keeps its count: asked once per change
                self._membership.rejoin()
                self._next_monitor = now + 30  # the leader applies or refuses it meanwhile


    def _parked_too_long(self) -> bool:
        """Whether the current model parks tasks that no follow-up of this host will
        place: a leader without one asks for a rebalance at once, others after
        `PARKED_GRACE_S` (once per epoch)."""
        model = self.model
        if model is None or not model.parked or self._follow_up is not None or (
                self._parked_asked == model.epoch):
            return False
        assert self._membership is not None
        if not self._membership.leader and _now_ms() - model.created_ms < PARKED_GRACE_S * 1000:
            return False
        self._parked_asked = model.epoch
        return True

    async def _advance_follow_up(self) -> None:
        """The leader publishes the target of an incremental rebalance once every parked
        task was let go (`handover.pending_releases`)."""
        if self._follow_up is None or time.monotonic() < self._next_follow_up:
            return
        self._next_follow_up = time.monotonic() + FOLLOW_UP_CHECK_S
        first, target = self._follow_up
        assert self._meta is not None
        state = await self._reader().read()
        if state.model is None or state.model.epoch != first.epoch or (
                await self._meta.fenced_epoch(self.config.name)) != first.epoch:
            log.info("host %r: epoch %d is no longer current; its follow-up is left to the "
                     "next rebalance", self.name, first.epoch)
            self._follow_up = None
            return
        waiting = pending_releases(first, state.workers, state.hosts)
        if waiting:
            log.debug("follow-up of epoch %d waits for %s", first.epoch, ", ".join(waiting))
            return
        self._follow_up = None
        self._move(HostPhase.CHANGING_MODEL)
        try:
            model = await publish_model(
                self._meta, self.config, replace(target, epoch=first.epoch + 1,
                                                 created_ms=_now_ms(),
                                                 reason=f"{target.reason}; follow-up: "
                                                 f"{len(first.parked)} task(s) placed"),
                previous=first, in_place=True)
            log.info("leader published job model epoch %d: the %d task(s) parked in epoch %d "
                     "were let go and now run on their new hosts", model.epoch,
                     len(first.parked), first.epoch)
            await self._follow_in_place()
        finally:
            self._move(HostPhase.RUNNING)

    async def _changed_in_place(self, held: bool) -> bool:
        """The leader of the last rebalance applies a change of the inputs' counts in place
        (no rebalance: `leader.change_in_place`); True when it did, or found the model
        already right (a held input grew on and stays held). Other hosts wait a while for
        it (the leader's monitor sees the change too) before asking for a rebalance; a
        change of inputs the model holds is always left to the leader (``held``)."""
        assert self._membership is not None and self.model is not None
        if self.model.parked:  # the follow-up placing them comes first
            return True
        if not self._membership.leader or self.phase is not HostPhase.RUNNING:
            # a follower, or a leader waiting for a round's model: the round decides first
            if self._counts_seen is None:
                self._counts_seen = time.monotonic()
            return held or time.monotonic() - self._counts_seen < IN_PLACE_GRACE_S
        assert self._service is not None
        self._move(HostPhase.CHANGING_MODEL)
        try:
            model = await change_in_place(self._service, self.model)
            if model is None:
                return False
            if model.in_place_since is None:  # published for a restart: hosts rebalance
                self._membership.rejoin()
                return True
            if model.epoch != self.model.epoch:
                await self._follow_in_place()
            return True
        finally:
            self._move(HostPhase.RUNNING)

