"""A host's lifecycle (`framework.lifecycle`): its phases and the moves between them, which
its `HostReport` (so `sampan status`) names."""

from __future__ import annotations

from enum import Enum

__all__ = ["HOST_TRANSITIONS", "HostPhase"]


class HostPhase(Enum):
    """Where a host (`sampan run JOB --host NAME`) is in its life."""

    CREATED = "created"
    """Constructed; `Host.run` not called yet."""
    STARTING = "starting"
    """Locking its state folder, opening systems, joining the job's group."""
    REBALANCING = "rebalancing"
    """In a rebalance of the job's group: said what it holds, no assignment yet."""
    BUILDING_MODEL = "building-model"
    """The leader of the round just ended, building and publishing its model."""
    AWAITING_MODEL = "awaiting-model"
    """Assigned a round whose leader publishes its model; waiting for it."""
    RUNNING = "running"
    """Running what the current model places here, watching the inputs."""
    CHANGING_MODEL = "changing-model"
    """The leader publishing a model between rebalances: a partition change applied in
    place, or the follow-up of an incremental rebalance."""
    STOPPING = "stopping"
    """Stopping its workers and replicas, leaving the group."""
    STOPPED = "stopped"
    """Ended on request (Ctrl-C, SIGTERM)."""
    FAILED = "failed"
    """Ended by an error (a refused host name included)."""


_P = HostPhase
_ENDING = frozenset({_P.STOPPING})
HOST_TRANSITIONS: dict[HostPhase, frozenset[HostPhase]] = {
    _P.CREATED: frozenset({_P.STARTING}),
    _P.STARTING: frozenset({_P.REBALANCING}) | _ENDING,
    # a round that starts over (a failed join) revokes again
    _P.REBALANCING: frozenset({_P.REBALANCING, _P.BUILDING_MODEL, _P.AWAITING_MODEL,
                               _P.RUNNING}) | _ENDING,
    _P.BUILDING_MODEL: frozenset({_P.RUNNING}) | _ENDING,
    _P.AWAITING_MODEL: frozenset({_P.RUNNING, _P.REBALANCING}) | _ENDING,
    _P.RUNNING: frozenset({_P.REBALANCING, _P.CHANGING_MODEL}) | _ENDING,
    _P.CHANGING_MODEL: frozenset({_P.RUNNING}) | _ENDING,
    _P.STOPPING: frozenset({_P.STOPPED, _P.FAILED}),
    _P.STOPPED: frozenset(),
    _P.FAILED: frozenset(),
}
"""Every phase → the phases it may move to; `framework.lifecycle.Lifecycle` checks them."""
