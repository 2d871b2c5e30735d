"""The coordinator's metrics, all read from its status and supervisor at scrape time."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from enum import Enum
from typing import Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric

from framework.config import JobConfig
from framework.logformat import set_context_provider
from framework.metadata import CoordinatorStatus
from framework.metadata.jobmodel import JobModel
from framework.metrics.collect import family, histogram_family, histogram_of
from framework.metrics.families import PAUSE_BUCKETS
from framework.metrics.server import MetricsServer, serve
from framework.metrics.targets import remove_targets_above, target_file

__all__ = ["CoordinatorMetrics", "CoordinatorView"]


class _WorkerProcess(Protocol):
    @property
    def process(self) -> asyncio.subprocess.Process: ...


class _SupervisorView(Protocol):
    @property
    def restarts(self) -> int: ...

    @property
    def fencings(self) -> int: ...

    @property
    def workers(self) -> Mapping[int, _WorkerProcess]: ...


class CoordinatorView(Protocol):
    """What metrics read of their coordinator (a `Coordinator`): its status, supervisor
    and job model, copied before iterating (the scrape runs on the server's thread)."""

    @property
    def status(self) -> CoordinatorStatus: ...

    @property
    def supervisor(self) -> _SupervisorView: ...

    @property
    def model(self) -> JobModel | None: ...

    @property
    def phase(self) -> Enum:
        """Its lifecycle phase (`framework.coordinator.phase.CoordinatorPhase`)."""
        ...


class CoordinatorMetrics:
    """Serves the coordinator's ``/metrics``; `serve` once its status is loaded."""

    def __init__(self, config: JobConfig) -> None:
        self.config = config
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        self._coordinator: CoordinatorView | None = None
        self._baseline = 0  # expansions recorded before this coordinator started
        self._server: MetricsServer | None = None

    def serve(self, coordinator: CoordinatorView) -> None:
        """Watch ``coordinator`` (its expansions so far are not counted again) and serve;
        the port goes into its status for `sampan status` and the workers' neighbours."""
        self._coordinator = coordinator
        self._baseline = len(coordinator.status.expansions)
        set_context_provider(lambda: {"epoch": coordinator.model.epoch if coordinator.model
                                      else None})
        if self.config.metrics.enabled and self._server is None:
            self._server = serve(self.registry, self.config.metrics.bind,
                                 self.config.metrics.port,
                                 f"coordinator of job {self.config.name!r}",
                                 target_file(self.config.state_dir, "coordinator"),
                                 {"sampan_job": self.config.name,
                                  "sampan_process": "coordinator"})
            remove_targets_above(self.config.state_dir, self.config.workers)
            coordinator.status.metrics_port = self._server.port
            coordinator.status.metrics_bind = self.config.metrics.bind

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    def collect(self) -> Iterator[Metric]:
        coordinator = self._coordinator
        if coordinator is None:
            return
        job = [self.config.name]
        supervisor, status = coordinator.supervisor, coordinator.status
        expansions = list(status.expansions)[self._baseline:]
        figures = (("sampan_worker_restarts", supervisor.restarts),
                   ("sampan_worker_fencings", supervisor.fencings),
                   ("sampan_workers_running", sum(  # a copy: the supervisor may spawn now
                       w.process.returncode is None for w in list(supervisor.workers.values()))),
                   ("sampan_expansions", len(expansions)),
                   ("sampan_expansion_refused", float(status.refusal is not None)))
        for name, value in figures:
            metric = family(name)
            metric.add_metric(job, value)
            yield metric
        pauses = histogram_of((e.pause_ms / 1000 for e in expansions if e.pause_ms is not None),
                              PAUSE_BUCKETS)
        pause = histogram_family("sampan_expansion_pause_seconds")
        pause.add_metric(job, pauses.buckets(), pauses.sum)
        yield pause
        epoch = family("sampan_job_model_epoch")
        if coordinator.model is not None:
            epoch.add_metric([*job, "coordinator"], coordinator.model.epoch)
        yield epoch
        now = coordinator.phase
        phase = family("sampan_coordinator_phase")
        for each in type(now):  # every phase, 1 for the current one: alerts see 0 → 1
            phase.add_metric([*job, each.name], float(each is now))
        yield phase
