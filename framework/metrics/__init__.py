"""Prometheus metrics of a job: what each worker, the coordinator and each host serve on
``/metrics``.

`WorkerMetrics`, `CoordinatorMetrics` and `HostMetrics` read most figures from the objects
they watch when Prometheus scrapes (nothing to do on the hot path); what only the hot path knows
(process latency, commit sizes) is accumulated once per batch or commit. `FAMILIES`
lists every metric with its labels (docs/metrics.md is its reference).
"""

from framework.metrics.coordinator import CoordinatorMetrics
from framework.metrics.families import FAMILIES, Family
from framework.metrics.host import HostMetrics
from framework.metrics.server import MetricsServer, serve
from framework.metrics.worker import WorkerMetrics, current, restore_progress

__all__ = [
    "FAMILIES",
    "CoordinatorMetrics",
    "Family",
    "HostMetrics",
    "MetricsServer",
    "WorkerMetrics",
    "current",
    "restore_progress",
    "serve",
]
