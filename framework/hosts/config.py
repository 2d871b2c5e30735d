"""One host's view of the job configuration: the job file with this host's state folder,
and the group timeouts derived from ``[coordinator]``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from framework.config import JobConfig

__all__ = ["host_config", "lead_timeout_ms", "rebalance_timeout_ms", "rebalance_wait_bound_ms"]


def host_config(config: JobConfig, data_dir: Path | None) -> JobConfig:
    """``config`` with ``job.data_dir`` replaced by ``data_dir`` (``--data-dir``).

    The digest stays the job file's: it identifies the job, which is the same on every host
    whatever folder each keeps its state in (job models carry it; workers compare it).
    """
    if data_dir is None:
        return config
    local = replace(config, data_dir=data_dir.resolve())
    local.__dict__["digest"] = config.digest  # cached_property: pin, do not recompute
    return local


def rebalance_timeout_ms(config: JobConfig) -> int:
    """How long the broker waits for every member to rejoin a round: a host first stops its
    workers (up to ``worker_stop_timeout_ms``) and replicas; 20 s of margin."""
    coordinator = config.coordinator
    return coordinator.session_timeout_ms + coordinator.worker_stop_timeout_ms + 20000


def lead_timeout_ms(config: JobConfig) -> int:
    """How long the leader may take to build and publish a model before it gives up."""
    return config.coordinator.session_timeout_ms + 60000


def rebalance_wait_bound_ms(config: JobConfig) -> int:
    """How long a host waits in one rebalance for an assignment before it rejoins as a new
    member: ``coordinator.max_rebalance_wait_ms``, or (0) the longest a sound round takes —
    every member rejoining (rebalance timeout), the leader's model step (lead timeout), and
    a session timeout for a departed member to be noticed."""
    configured = config.coordinator.max_rebalance_wait_ms
    if configured:
        return configured
    return (rebalance_timeout_ms(config) + lead_timeout_ms(config)
            + config.coordinator.session_timeout_ms)
