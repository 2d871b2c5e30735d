"""A worker's lifecycle (`framework.lifecycle`): its states and the moves between them,
which its `WorkerReport` (so `sampan status`) and the ``sampan_worker_state`` metric name."""

from __future__ import annotations

from enum import Enum

__all__ = ["ENDS", "WORKER_TRANSITIONS", "WorkerState"]


class WorkerState(Enum):
    """Where a worker (`Worker.run`) is in its life."""

    STARTING = "starting"
    """Loading the task class, opening systems, waiting to be told to go, reading the model."""
    RESTORING = "restoring"
    """Opening its tasks' stores, bringing them up to their changelogs, initialising tasks."""
    RUNNING = "running"
    """Fetching, processing, windowing and committing."""
    CHANGING = "changing"
    """A fence announced a newer job model: it is read aside while the tasks go on (no
    commit), then taken in place (`framework.worker.following`)."""
    STOPPING = "stopping"
    """Its last commit landed (asked to stop, a task asked to, or not needed, or stopped
    while restoring): closing tasks, stores and systems."""
    STOPPED = "stopped"
    """Ended on request, everything committed and closed."""
    FENCED = "fenced"
    """Ended by a newer job model it could not take in place (or a fenced producer): its
    supervisor starts it on the new model."""
    FAILED = "failed"
    """Ended by an error."""


_S = WorkerState
ENDS = frozenset({_S.STOPPED, _S.FENCED, _S.FAILED})
"""The final states: a worker moves to one once it closed everything."""
_BROKEN = frozenset({_S.FENCED, _S.FAILED})
WORKER_TRANSITIONS: dict[WorkerState, frozenset[WorkerState]] = {
    _S.STARTING: frozenset({_S.RESTORING, _S.STOPPING}) | _BROKEN,
    _S.RESTORING: frozenset({_S.RUNNING, _S.STOPPING}) | _BROKEN,
    _S.RUNNING: frozenset({_S.CHANGING, _S.STOPPING}) | _BROKEN,
    _S.CHANGING: frozenset({_S.RUNNING}) | _BROKEN,
    _S.STOPPING: frozenset({_S.STOPPED}) | _BROKEN,
    _S.STOPPED: frozenset(),
    _S.FENCED: frozenset(),
    _S.FAILED: frozenset(),
}
"""Every state → the states it may move to; `framework.lifecycle.Lifecycle` checks them.
A stop while a newer model is read aside takes that model first (CHANGING → RUNNING →
STOPPING): the refused commit is written again at the new epoch, then the worker stops."""
