"""`sampan status` reads barrier progress from the checkpoints, not from the model alone,
and turns a status document into a health and an exit status."""

from __future__ import annotations

from typing import Any

import pytest

from framework.commands.status_document import JobStatus
from framework.commands.status_health import assess
from framework.jobmodel import BarrierStage, TaskModel
from framework.metadata import CoordinatorStatus, Refusal, Unreachable, WorkerCrashes
from groupers import SystemStreamPartition as SSP


def ssp(p: int) -> SSP:
    return SSP("local", "words", p)


TASK = TaskModel(
    name="Partition 0", ssps=frozenset(ssp(p) for p in (0, 2, 4, 6)), changelog_partition=0,
    worker=0, stages=(BarrierStage({ssp(0): 100}, frozenset({ssp(2)})),
                      BarrierStage({ssp(0): 150, ssp(2): 40}, frozenset({ssp(4), ssp(6)}))))


def test_nothing_checkpointed_holds_every_stage() -> None:
    assert TASK.held_behind_barrier({}) == {ssp(2), ssp(4), ssp(6)}


def test_first_stage_passed_holds_only_the_second() -> None:
    assert TASK.held_behind_barrier({ssp(0): 120, ssp(2): 5}) == {ssp(4), ssp(6)}


def test_stages_are_released_in_order() -> None:
    """The second barrier's offsets reached does not release it before the first."""
    assert TASK.held_behind_barrier({ssp(0): 99, ssp(2): 40}) == {ssp(2), ssp(4), ssp(6)}


def test_every_stage_passed_holds_nothing() -> None:
    assert TASK.held_behind_barrier({ssp(0): 150, ssp(2): 40}) == frozenset()


def test_pending_stages_count_the_stages_not_passed_in_order() -> None:
    assert [TASK.pending_stages(done) for done in (
        {}, {ssp(0): 120, ssp(2): 5}, {ssp(0): 99, ssp(2): 40}, {ssp(0): 150, ssp(2): 40},
    )] == [2, 1, 2, 0]


# -- the health a status document amounts to (`framework.commands.status_health`) -------

NOW = 1_000_000_000


def running(unreachable: list[Unreachable] | None = None, **report: Any) -> JobStatus:
    """A running job whose coordinator reported ``report`` (its fields)."""
    return JobStatus("j", "running", "running", None, unreachable=unreachable or [],
                     report=CoordinatorStatus(
                         state="running", crash_window_ms=600_000, max_restarts=5, **report))


def ended(state: Any, error: str | None = None, not_running: str | None = None) -> JobStatus:
    return JobStatus("j", state, None, not_running, error=error)


def crash(*exits: int, restart_ms: int | None = None, restarted_ms: int | None = None,
          ) -> WorkerCrashes:
    return WorkerCrashes(0, [NOW - e for e in exits], "killed by SIGKILL", None, restart_ms,
                         restarted_ms)


@pytest.mark.parametrize(("status", "health"), [
    (running(), ("healthy", 0)),
    (running(crashes=[crash(5_000, restarted_ms=NOW - 4_000)]), ("healthy", 0)),
    (running(crashes=[crash(5_000, restart_ms=NOW + 1_000)]), ("degraded", 1)),
    (running(crashes=[crash(9_000, 5_000, restarted_ms=NOW - 4_000)]), ("degraded", 1)),
    (running(crashes=[crash(90_000, 60_000, restarted_ms=NOW - 59_000)]), ("healthy", 0)),
    (running(crashes=[crash(700_000, 650_000, restarted_ms=NOW - 4_000)]), ("healthy", 0)),
    (running(refusal=Refusal("local.a 2→3", "not a multiple", NOW)), ("degraded", 1)),
    (running(unreachable=[Unreachable("kafka", NOW, "x", NOW)]), ("degraded", 1)),
    (ended("died", not_running="gone"), ("not running", 3)),
    (ended("stopped"), ("not running", 3)),
    (ended("not started"), ("not running", 3)),
    (ended("failed", error="boom"), ("failed", 4)),
], ids=["healthy", "one-crash-running-again", "down", "crash-looping", "settled-after-crashes",
        "crashes-out-of-the-window", "refused", "unreachable", "died", "stopped",
        "not-started", "failed"])
def test_health_and_exit_status(status: JobStatus, health: tuple[str, int]) -> None:
    verdict = assess(status, NOW)
    assert (verdict.health, verdict.exit_status) == health
    assert bool(verdict.problems) == (health[0] != "healthy")
