"""A host's `HostReport` on the coordinator stream: what it runs, what its last rebalance
moved and how the tasks that rebalance started here were restored (from its workers'
reports), and how far behind its standby and warmup copies are."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from framework.config import JobConfig
from framework.hosts.handover import previous_host
from framework.metadata import (
    CoordinatorReader,
    HostReport,
    HostState,
    WorkerReport,
    publish_host_report,
)
from framework.metadata.jobmodel import JobModel
from framework.systems.base import System

__all__ = ["HostReporter"]

log = logging.getLogger(__name__)

HEARTBEAT_S = 10.0
"""A report is rewritten at least this often (its ``updated_ms`` shows the host lives)."""
POLL_S = 0.5
"""How often the host looks for its workers' reports until they all resumed."""


def _now_ms() -> int:
    return int(time.time() * 1000)


def _gained(previous: JobModel | None, active: Sequence[str], before: set[str]
            ) -> dict[str, str]:
    """Task active here now and not before → the host it ran on or was released by in
    ``previous`` ("" if none)."""
    return {t: (previous_host(previous, t) or "") if previous is not None else ""
            for t in active if t not in before}


class HostReporter:
    """Builds and publishes one host's reports."""

    def __init__(self, config: JobConfig, meta: System, coordinator: CoordinatorReader,
                 host: str, machine: str, phase: str | None = None,
                 metrics_port: int | None = None) -> None:
        self.config = config
        self.meta = meta
        self.coordinator = coordinator
        self.report = HostReport(host=host, pid=os.getpid(), machine=machine, state="joining",
                                 phase=phase, metrics_port=metrics_port)
        self._model: JobModel | None = None
        self._stopped: dict[str, int] = {}
        """Gained task → when its previous host stopped it (that host's `revoked_ms`)."""
        self._carried: dict[str, int] = {}
        """Unavailability measured at the first model of an incremental rebalance, kept by
        its follow-up (which measures the tasks it places)."""
        self._quiet = False
        """The last model moved no task to or from this host: what moved before (and how
        long it was unavailable) stays in the report."""
        self._measured = True
        """The last move's unavailability is in the report: its tasks resumed here. A quiet
        model coming before they did leaves it to be measured when they do."""
        self._moved_ms = 0
        """When the model of the last move was assigned here (a failed host's task is
        unavailable from then, at the latest)."""
        self._published = 0.0
        self._polled = 0.0
        self._dirty = True

    def phase(self, name: str) -> None:
        """The host moved to lifecycle phase ``name``: the next `tick` publishes it."""
        if name != self.report.phase:
            self.report = replace(self.report, phase=name)
            self._dirty = True

    async def revoked(self, running: bool) -> None:
        """The rebalance stops this host's tasks now (``running``: it had some); published
        before the host rejoins, so the hosts taking its tasks read when they stopped."""
        self.report = replace(self.report, revoked_ms=_now_ms() if running else None)
        await self._publish()

    async def assigned(self, model: JobModel, previous: JobModel | None,
                       workers: Sequence[int], active: list[str], standby: list[str],
                       warmup: list[str], *, leader: bool, kept: bool = False) -> None:
        """``kept``: the workers went on through the rebalance (incremental), so the
        tasks active here before and now never stopped."""
        self._model = model
        if kept:
            self.report = replace(self.report, revoked_ms=None)
        before = set(self.report.active) if (
            kept or self.report.revoked_ms is not None) else set()
        gained = _gained(previous, active, before)
        lost = sorted(before - set(active))
        self._quiet = kept and not gained and not lost
        if not self._quiet:
            self._carried = {}
        hosts = (await self.coordinator.read()).hosts if gained else {}
        if not self._quiet:
            self._stopped = {}
        for task, host in gained.items():  # stopped in this round (a failed host did not)
            other = hosts.get(host)
            if other is not None and other.host != self.report.host and (
                    other.revoked_ms or 0) >= (other.assigned_ms or 0) > 0:
                self._stopped[task] = other.revoked_ms or 0
        self.report = replace(
            self.report, epoch=model.epoch, state="running", leader=leader,
            workers=list(workers), active=active, standby=standby, warmup=warmup,
            replica_gaps={},
            assigned_ms=_now_ms(), resumed_ms=None if workers else _now_ms(), error=None)
        self._moved(gained, lost, model.epoch)
        self._restores_started()
        await self._publish()

    async def tick(self, gaps: Mapping[str, int]) -> None:
        """Publish when something changed (at most every `POLL_S`) or on the heartbeat."""
        now = time.monotonic()
        if self.report.resumed_ms is None and self._model is not None and (
                now - self._polled >= POLL_S):
            self._polled = now
            await self._collect_restores()
        if dict(gaps) != self.report.replica_gaps:
            self.report = replace(self.report, replica_gaps=dict(sorted(gaps.items())))
            self._dirty = True
        if (self._dirty and now - self._published >= POLL_S) or (
                now - self._published >= HEARTBEAT_S):
            await self._publish()

    async def _collect_restores(self) -> None:
        assert self._model is not None
        reports = (await self.coordinator.read()).workers
        current: dict[int, WorkerReport] = {
            w: r for w, r in reports.items()
            if w in self.report.workers and r.epoch == self._model.epoch and r.resumed_ms}
        if len(current) < len(self.report.workers):
            return
        resumed = max(r.resumed_ms or 0 for r in current.values())
        self._dirty = True
        modes: dict[str, str] = {}
        after: dict[str, dict[str, int]] = {}
        counted: dict[str, int] = {}
        epochs: dict[str, int] = {}
        restored_to: dict[str, int] = {}
        for report in current.values():
            modes.update(report.restore_modes)
            after.update(report.store_positions)
            counted.update(report.restored_tasks)
            epochs.update(report.task_epochs)
            restored_to.update(report.restored_ends)
        # What a worker restored for each task when it last started or added it counts for
        # the tasks started in the rebalance the report describes (`moved_epoch`: its first
        # model, so a follow-up keeps what its first model restored, and a model moving
        # nothing here the last move's); a task that stayed through it restored none. (A
        # worker without `task_epochs` counts this epoch's tasks only.)
        since = self.report.moved_epoch
        fresh = {t for t in counted if epochs.get(t, self._model.epoch) >= (since or 0)}
        restored = {task: counted[task] if task in fresh else 0 for task in self.report.active}
        modes = {k: m for k, m in modes.items() if k.split("/", 1)[0] in fresh}
        # where each task's restore ended (a task restored by an earlier model of this
        # rebalance has run since: its stores' positions have moved on)
        ends = {t: restored_to[t] if t in restored_to else sum(after.get(t, {}).values())
                for t in self.report.active}
        kept = self._quiet and self._measured
        unavailable = self.report.unavailable_ms if kept else {
            **self._carried, **self._unavailable(current)}
        self._measured = True
        if self._quiet:  # nothing moved here: the last move's restore ends stay reported
            ends.update((t, n) for t, n in self.report.restore_ends.items()
                        if t in ends and t in fresh)
        self.report = replace(self.report, restore_modes=dict(sorted(modes.items())),
                              restored=restored, unavailable_ms=unavailable,
                              restore_ends=ends, resumed_ms=resumed)
        log.info("host %r resumed epoch %d: restored %s (%s)%s", self.report.host,
                 self._model.epoch, restored, modes,
                 " (no task moved here)" if kept else "")

    def _restores_started(self) -> None:
        """A new model's report keeps the restores of the last model that moved a task
        here when this one moved none (`_quiet`); otherwise its restores are to come."""
        if not self._quiet:
            self.report = replace(self.report, restored={}, restore_modes={},
                                  restore_ends={})

    async def in_place(self, model: JobModel, previous: JobModel | None,
                       active: list[str]) -> None:
        """The host's workers take ``model`` where they run (an expansion, or the follow-up
        of an incremental rebalance placing the tasks ``previous`` parked); resumed once
        every worker reported the new epoch. A task gained here was unavailable from when
        ``previous`` parked it (its publication) until its worker here ran it."""
        self._model = model
        before = set(self.report.active)
        gained = _gained(previous, active, before)
        lost = sorted(before - set(active))
        self._quiet = not gained and not lost
        if not self._quiet:
            self._carried = {}
        parked_at = previous.epoch if previous is not None and previous.parked else None
        if parked_at is not None and not self._quiet and self.report.moved_epoch == parked_at:
            # the follow-up of the rebalance that parked them: one rebalance, one report
            # (unless the parking model moved nothing here: the report still shows an
            # older move, which is not this rebalance's)
            self._carried = dict(self.report.unavailable_ms)
            gained = {**self.report.gained, **gained}
            lost = sorted(set(self.report.lost) | set(lost))
        if not self._quiet:
            self._stopped = {t: previous.created_ms for t in gained
                             if previous is not None and t in previous.parked}
        standby = sorted(t for t, h in model.standbys.items() if self.report.host in h)
        warmup = sorted(t for t, h in model.warmups.items() if self.report.host in h)
        self.report = replace(
            self.report, epoch=model.epoch,
            assigned_ms=_now_ms(), active=active, standby=standby, warmup=warmup,
            revoked_ms=None, resumed_ms=None if self.report.workers else _now_ms())
        self._moved(gained, lost, model.epoch if parked_at is None else parked_at)
        self._restores_started()
        await self._publish()

    def _moved(self, gained: dict[str, str], lost: list[str], epoch: int) -> None:
        """Record what the rebalance of ``epoch`` moved (unless this model moved nothing:
        see `_quiet`)."""
        if not self._quiet:
            self.report = replace(self.report, gained=gained, lost=lost, unavailable_ms={},
                                  moved_epoch=epoch)
            self._measured, self._moved_ms = False, self.report.assigned_ms or _now_ms()

    def _unavailable(self, current: Mapping[int, WorkerReport]) -> dict[str, int]:
        """Active task → from when it stopped until its worker resumed here: stopped here
        (`revoked_ms`) or, gained, on the host it came from; a task whose host failed (no
        stop reported) counts from this host's stop or the assignment of the model that
        moved it here — the time the group took to notice the failure comes on top. Tasks
        that ran nowhere before: none."""
        here = self.report.revoked_ms
        result: dict[str, int] = {}
        for report in current.values():
            for task in report.tasks:
                if task in self._carried:  # measured in the first model of its rebalance
                    continue
                came_from = self.report.gained.get(task)
                if came_from is None:
                    stopped = here
                elif task in self._stopped:
                    stopped = self._stopped[task]
                else:
                    stopped = (here or self._moved_ms) if came_from else None
                if stopped is not None and report.resumed_ms is not None:
                    result[task] = max(0, report.resumed_ms - stopped)
        return dict(sorted(result.items()))

    async def _publish(self) -> None:
        self.report = replace(self.report, updated_ms=_now_ms())
        await publish_host_report(self.meta, self.config, self.report)
        self._published = time.monotonic()
        self._dirty = False

    async def finish(self, state: HostState, error: BaseException | None) -> None:
        self.report = replace(self.report, state=state, workers=[], active=[], standby=[],
                              warmup=[], error=str(error) if isinstance(error, Exception)
                              else None)
        await self._publish()
