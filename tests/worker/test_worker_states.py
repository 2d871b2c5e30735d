"""The worker's lifecycle table (`framework.worker.states`): every move it lists is
allowed, every other one raises `IllegalTransitionError`, and the ends are final."""

from __future__ import annotations

import pytest

from framework.lifecycle import IllegalTransitionError, Lifecycle
from framework.worker.states import ENDS, WORKER_TRANSITIONS, WorkerState

S = WorkerState
LEGAL = sorted({
    (S.STARTING, S.RESTORING), (S.STARTING, S.STOPPING),
    (S.RESTORING, S.RUNNING), (S.RESTORING, S.STOPPING),
    (S.RUNNING, S.CHANGING), (S.RUNNING, S.STOPPING),
    (S.CHANGING, S.RUNNING),
    (S.STOPPING, S.STOPPED),
    *((live, end) for live in (S.STARTING, S.RESTORING, S.RUNNING, S.CHANGING, S.STOPPING)
      for end in (S.FENCED, S.FAILED)),
}, key=lambda m: (m[0].name, m[1].name))
"""The table written out: a change to `WORKER_TRANSITIONS` must change this too."""
ILLEGAL = [(a, b) for a in WorkerState for b in WorkerState if (a, b) not in LEGAL]


def test_the_transition_table() -> None:
    assert {(a, b) for a, targets in WORKER_TRANSITIONS.items() for b in targets} == set(LEGAL)


@pytest.mark.parametrize(("before", "after"), LEGAL, ids=lambda s: s.name)
def test_every_listed_move_is_allowed(before: WorkerState, after: WorkerState) -> None:
    worker = Lifecycle("worker 0", before, WORKER_TRANSITIONS)
    worker.to(after)
    assert worker.state is after


@pytest.mark.parametrize(("before", "after"), ILLEGAL, ids=lambda s: s.name)
def test_every_other_move_raises_and_changes_nothing(before: WorkerState,
                                                     after: WorkerState) -> None:
    worker = Lifecycle("worker 0", before, WORKER_TRANSITIONS)
    with pytest.raises(IllegalTransitionError,
                       match=rf"^worker 0: illegal transition {before.name} → {after.name}"):
        worker.to(after)
    assert worker.state is before


def test_a_running_worker_cannot_jump_back_to_restoring() -> None:
    worker = Lifecycle("worker 0", WorkerState.RUNNING, WORKER_TRANSITIONS)
    with pytest.raises(IllegalTransitionError, match="legal from RUNNING: CHANGING, FAILED, "
                                                     "FENCED, STOPPING"):
        worker.to(WorkerState.RESTORING)


def test_the_ends_are_final_and_reachable_from_every_live_state() -> None:
    assert {WorkerState.STOPPED, WorkerState.FENCED, WorkerState.FAILED} == ENDS
    assert all(not WORKER_TRANSITIONS[end] for end in ENDS)
    live = set(WorkerState) - ENDS
    assert all({WorkerState.FENCED, WorkerState.FAILED} <= WORKER_TRANSITIONS[s] for s in live)
    assert {s for s in WorkerState if WorkerState.STOPPED in WORKER_TRANSITIONS[s]} == {
        WorkerState.STOPPING}


def test_a_start_runs_changes_in_place_and_stops_along_the_table() -> None:
    moves: list[str] = []
    worker = Lifecycle("worker 0", WorkerState.STARTING, WORKER_TRANSITIONS,
                       lambda _, after: moves.append(after.name))
    for state in ("RESTORING", "RUNNING", "CHANGING", "RUNNING", "STOPPING", "STOPPED"):
        worker.to(WorkerState[state])
    assert moves == ["RESTORING", "RUNNING", "CHANGING", "RUNNING", "STOPPING", "STOPPED"]
