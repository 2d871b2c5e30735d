"""A fixed ``[metrics] port`` with several hosts: one host of the job per machine.

Worker ``i`` listens on ``port + 1 + i`` and worker ids are job-wide, but a rebalance moves
ids between hosts while the old workers may still be stopping, and nothing else tells two
hosts on one machine apart. So a host with a fixed port claims the base port itself first
thing (then hands it to its own ``/metrics`` endpoint, `framework.metrics.HostMetrics`); a
second host of the job on the same machine cannot bind it and stops at once, naming the key
and the fix.
"""

from __future__ import annotations

import socket

from framework.config import JobConfig
from framework.hosts.errors import HostError

__all__ = ["MetricsPortInUseError", "claim_base_port"]


class MetricsPortInUseError(HostError):
    """A fixed ``[metrics] port`` is taken on this machine (another host of the job)."""


def claim_base_port(config: JobConfig, host: str) -> socket.socket | None:
    """Bind ``[metrics] port`` on ``[metrics] bind`` for host ``host`` (None when metrics
    are off or the port is 0); the caller closes the socket when the host stops."""
    metrics = config.metrics
    if not metrics.enabled or not metrics.port:
        return None
    family = socket.AF_INET6 if ":" in metrics.bind else socket.AF_INET
    claim = socket.socket(family, socket.SOCK_STREAM)
    claim.set_inheritable(False)
    try:
        claim.bind((metrics.bind, metrics.port))
    except OSError as error:
        claim.close()
        raise MetricsPortInUseError(
            f"[metrics] port = {metrics.port}: host {host!r} of job {config.name!r} cannot "
            f"hold port {metrics.port} on {metrics.bind} ({error.strerror}); another host of "
            f"the job (or another process) on this machine uses it. With a fixed port each "
            f"machine runs one host of the job: set [metrics] port = 0 (free ports, listed by "
            f"sampan status), or run each host on its own machine") from None
    return claim
