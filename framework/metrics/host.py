"""A host's own metrics (`sampan run JOB --host NAME`): its lifecycle phase and the epoch
of the model it runs, read from the host at scrape time. Its workers serve theirs."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from enum import Enum
from typing import Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric

from framework.config import JobConfig
from framework.metadata.jobmodel import JobModel
from framework.metrics.collect import family
from framework.metrics.server import MetricsServer, serve
from framework.metrics.targets import target_file

__all__ = ["HostMetrics", "HostView"]


class HostView(Protocol):
    """What metrics read of their host (a `framework.hosts.host.Host`)."""

    @property
    def name(self) -> str: ...

    @property
    def phase(self) -> Enum:
        """Its lifecycle phase (`framework.hosts.phase.HostPhase`)."""
        ...

    @property
    def model(self) -> JobModel | None: ...


class HostMetrics:
    """Serves host ``name``'s ``/metrics`` (when ``[metrics]`` is enabled)."""

    def __init__(self, config: JobConfig, name: str) -> None:
        self.config = config
        self.name = name
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        self._host: HostView | None = None
        self._server: MetricsServer | None = None

    @property
    def port(self) -> int | None:
        """The port it serves on; None when it does not serve."""
        return self._server.port if self._server is not None else None

    def serve(self, host: HostView, claim: socket.socket | None = None) -> None:
        """Watch ``host`` and serve its metrics: on ``[metrics] port`` when fixed (the
        base port ``claim`` holds for this host, handed over to the endpoint), else on
        a free port (the one it had last time when free)."""
        self._host = host
        metrics = self.config.metrics
        if not metrics.enabled or self._server is not None:
            return
        if claim is not None:
            claim.close()
        process = f"host-{self.name}"
        self._server = serve(self.registry, metrics.bind, metrics.port,
                             f"host {self.name!r} of job {self.config.name!r}",
                             target_file(self.config.state_dir, process),
                             {"sampan_job": self.config.name, "sampan_process": process})

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    def collect(self) -> Iterator[Metric]:
        host = self._host
        if host is None:
            return
        now = host.phase
        phase = family("sampan_host_phase")
        for each in type(now):  # every phase, 1 for the current one
            phase.add_metric([self.config.name, self.name, each.name], float(each is now))
        yield phase
        epoch = family("sampan_job_model_epoch")
        if host.model is not None:
            epoch.add_metric([self.config.name, f"host-{self.name}"], host.model.epoch)
        yield epoch
