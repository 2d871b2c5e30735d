"""The one-host coordinator's lifecycle (`framework.lifecycle`): its phases and the moves
between them, which `sampan status` and the ``sampan_coordinator_phase`` metric name."""

from __future__ import annotations

from enum import Enum

from framework.metadata import RunState

__all__ = ["COORDINATOR_TRANSITIONS", "CoordinatorPhase", "run_state"]


class CoordinatorPhase(Enum):
    """Where a coordinator (`sampan run`) is in its life."""

    CREATED = "created"
    """Constructed; `Coordinator.run` not called yet."""
    STARTING = "starting"
    """Opening systems, taking the lease, publishing the first model, starting workers."""
    RUNNING = "running"
    """Supervising workers and watching the inputs (the monitor)."""
    CHANGING_MODEL = "changing-model"
    """Deciding and publishing the next model after a partition change (in place, or with
    the workers stopped and started again)."""
    STOPPING = "stopping"
    """Stopping workers and background tasks, releasing the lease."""
    STOPPED = "stopped"
    """Ended on request (Ctrl-C, SIGTERM, a lost lease)."""
    FAILED = "failed"
    """Ended by an error."""


_P = CoordinatorPhase
COORDINATOR_TRANSITIONS: dict[CoordinatorPhase, frozenset[CoordinatorPhase]] = {
    _P.CREATED: frozenset({_P.STARTING, _P.STOPPING}),
    _P.STARTING: frozenset({_P.RUNNING, _P.STOPPING}),
    _P.RUNNING: frozenset({_P.CHANGING_MODEL, _P.STOPPING}),
    _P.CHANGING_MODEL: frozenset({_P.RUNNING, _P.STOPPING}),
    _P.STOPPING: frozenset({_P.STOPPED, _P.FAILED}),
    _P.STOPPED: frozenset(),
    _P.FAILED: frozenset(),
}
"""Every phase → the phases it may move to; `framework.lifecycle.Lifecycle` checks them."""


def run_state(phase: CoordinatorPhase) -> RunState:
    """The coarse state a status and run file keep (``running`` until the run ended)."""
    if phase is CoordinatorPhase.STOPPED:
        return "stopped"
    if phase is CoordinatorPhase.FAILED:
        return "failed"
    return "running"
