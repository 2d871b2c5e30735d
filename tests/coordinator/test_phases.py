"""The coordinator's lifecycle: its transition table written out, the phases a real run
goes through (an in-process coordinator on the local log, no workers), and the phase in
its status — the record, `sampan status` text and ``--json``."""

from __future__ import annotations

import asyncio
import io
import shutil
import time
from pathlib import Path

import pytest
from jobs.jobfiles import COUNT_TASK, count_job_text
from polling import apoll

from framework.commands.status_document import Endpoints, JobFigures, JobStatus
from framework.commands.status_text import print_status
from framework.config import load_config
from framework.coordinator.phase import COORDINATOR_TRANSITIONS, CoordinatorPhase, run_state
from framework.coordinator.process import Coordinator
from framework.errors import StreamNotFoundError
from framework.lifecycle import IllegalTransitionError
from framework.metadata import CoordinatorStatus, read_state

P = CoordinatorPhase

LEGAL = {
    (P.CREATED, P.STARTING), (P.CREATED, P.STOPPING),
    (P.STARTING, P.RUNNING), (P.STARTING, P.STOPPING),
    (P.RUNNING, P.CHANGING_MODEL), (P.RUNNING, P.STOPPING),
    (P.CHANGING_MODEL, P.RUNNING), (P.CHANGING_MODEL, P.STOPPING),
    (P.STOPPING, P.STOPPED), (P.STOPPING, P.FAILED),
}


def test_the_transition_table() -> None:
    assert {(a, b) for a, targets in COORDINATOR_TRANSITIONS.items() for b in targets} == LEGAL


@pytest.mark.parametrize(("before", "after"), sorted(
    {(a, b) for a in P for b in P} - LEGAL, key=lambda m: (m[0].name, m[1].name)))
def test_every_other_move_is_refused_naming_both_phases(
        tmp_path: Path, before: CoordinatorPhase, after: CoordinatorPhase) -> None:
    coordinator = _coordinator(tmp_path)
    coordinator.lifecycle._state = before  # placed there: only the move is under test
    with pytest.raises(IllegalTransitionError,
                       match=f"coordinator of job 'phases': illegal transition {before.name} "
                             f"→ {after.name} "):
        coordinator.lifecycle.to(after)
    assert coordinator.phase is before


@pytest.mark.parametrize(("phase", "state"), [
    (P.CREATED, "running"), (P.STARTING, "running"), (P.RUNNING, "running"),
    (P.CHANGING_MODEL, "running"), (P.STOPPING, "running"), (P.STOPPED, "stopped"),
    (P.FAILED, "failed")])
def test_the_coarse_state_a_status_keeps(phase: CoordinatorPhase, state: str) -> None:
    assert run_state(phase) == state


def _coordinator(folder: Path, inputs: str | None = None) -> Coordinator:
    folder.mkdir(exist_ok=True)
    shutil.copy(COUNT_TASK, folder / "count_task.py")
    text = count_job_text("phases", {"words": 2})
    if inputs is not None:
        text = text.replace('[streams."local.words"]\npartitions = 2\n', inputs)
    (folder / "job.toml").write_text(text)
    return Coordinator(load_config(folder / "job.toml"), start_workers=False)


def _recorded(coordinator: Coordinator) -> list[str]:
    """Every phase ``coordinator`` moves to from now on, by name."""
    seen: list[str] = []
    move = coordinator.lifecycle.to

    def recording(phase: CoordinatorPhase) -> None:
        move(phase)
        seen.append(phase.name)

    coordinator.lifecycle.to = recording  # type: ignore[method-assign]
    return seen


async def _until(what: str, condition: object) -> None:
    started = time.monotonic()
    while not condition():  # type: ignore[operator]
        assert time.monotonic() - started < 120, f"timed out waiting for {what}"
        await apoll(started)


async def test_a_run_goes_through_its_phases_and_reports_each(tmp_path: Path) -> None:
    coordinator = _coordinator(tmp_path / "job")
    seen = _recorded(coordinator)
    assert coordinator.phase is P.CREATED
    running = asyncio.create_task(coordinator.run())
    try:
        await _until("the first model", lambda: coordinator.phase is P.RUNNING)
        assert coordinator.model is not None and coordinator.model.epoch == 1
        recorded = (await read_state(coordinator.meta, coordinator.config)).status
        assert (recorded.state, recorded.phase) == ("running", "RUNNING")
        await coordinator.systems["local"].expand_stream("words", 4)
        await _until("the expansion's model", lambda: coordinator.model is not None
                     and coordinator.model.epoch == 2 and coordinator.phase is P.RUNNING)
    finally:
        coordinator.stop.set()
        await running
    assert seen == ["STARTING", "RUNNING", "CHANGING_MODEL", "RUNNING", "STOPPING",
                    "STOPPED"]
    config = coordinator.config
    await coordinator.open_systems()
    try:
        ended = (await read_state(coordinator.meta, config)).status
    finally:
        await coordinator.close_systems()
    assert (ended.state, ended.phase, ended.epoch) == ("stopped", "STOPPED", 2)


async def test_a_run_that_fails_while_starting_ends_failed(tmp_path: Path) -> None:
    # words is declared without partitions and does not exist: the start fails
    coordinator = _coordinator(tmp_path / "job", inputs='[streams."local.words"]\n')
    seen = _recorded(coordinator)
    with pytest.raises(StreamNotFoundError, match=r"input stream local\.words does not exist"):
        await coordinator.run()
    assert seen == ["STARTING", "STOPPING", "FAILED"]
    await coordinator.open_systems()
    try:
        ended = (await read_state(coordinator.meta, coordinator.config)).status
    finally:
        await coordinator.close_systems()
    assert (ended.state, ended.phase) == ("failed", "FAILED")


def _status(phase: str | None, state: str = "running") -> JobStatus:
    figures = JobFigures(epoch=2, reason="r", partition_counts={}, workers=1, expansions=[],
                         restoring=[], metrics=Endpoints(None, {}), worker_reports={},
                         total_lag=0, tasks=[], retention_resets=[])
    return JobStatus("j", state, state, None, figures=figures,  # type: ignore[arg-type]
                     report=CoordinatorStatus(state=state, phase=phase))  # type: ignore[arg-type]


def test_status_names_the_phase_after_the_health() -> None:
    out = io.StringIO()
    print_status(_status("CHANGING_MODEL"), out)
    assert "\n  health: not running (exit status 3)\n  coordinator phase: CHANGING_MODEL\n" in (
        out.getvalue())
    assert _status("CHANGING_MODEL").to_json()["phase"] == "CHANGING_MODEL"


def test_an_ended_coordinators_phase_is_in_the_json_only() -> None:
    """Its state (stopped, failed) says it in the text already."""
    out = io.StringIO()
    print_status(_status("FAILED", "failed"), out)
    assert "phase" not in out.getvalue()
    assert _status("FAILED", "failed").to_json()["phase"] == "FAILED"


def test_a_status_from_a_coordinator_without_phases_prints_none() -> None:
    out = io.StringIO()
    print_status(_status(None), out)
    assert "phase" not in out.getvalue()
    assert _status(None).to_json()["phase"] is None
