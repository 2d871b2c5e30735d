"""`sampan status` reads barrier progress from the checkpoints, not from the model alone,
and turns a status document into a health and an exit status."""

from __future__ import annotations

import io
from typing import Any

import pytest

from framework.commands.status_document import Endpoints, JobFigures, JobStatus, SspRow, TaskRow
from framework.commands.status_health import assess
from framework.commands.status_text import print_status
from framework.metadata import CoordinatorStatus, Refusal, Unreachable, WorkerCrashes
from framework.metadata.jobmodel import BarrierStage, TaskModel
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


# -- the text of a status (`framework.commands.status_text`) ---------------------------------


def figures(partition_counts: dict[str, int], now: dict[str, int], held: list[str],
            stages: tuple[int, int] = (0, 0)) -> JobFigures:
    """A status's figures: one task on ``local.words[0]`` with ``stages`` (barrier stages,
    passed); the inputs read at ``partition_counts``, their streams at ``now``."""
    row = SspRow(("local", "words", 0), 10, 10, 0, held=False, past_end=False)
    task = TaskRow("Partition 0", 0, stages[0], stages[1], 0, [row], {"local.words": 0})
    return JobFigures(epoch=2, reason="r", partition_counts=partition_counts, workers=1,
                      expansions=[], restoring=[], metrics=Endpoints(None, {}),
                      worker_reports={}, total_lag=0, tasks=[task], retention_resets=[],
                      stream_partition_counts=now, held_inputs=held)


def text(job: JobFigures) -> str:
    status = JobStatus("j", "running", "running", None, figures=job,
                       report=CoordinatorStatus(state="running"))
    out = io.StringIO()
    print_status(status, out)
    return out.getvalue()


@pytest.mark.parametrize(("counts", "now", "held", "line"), [
    ({"local.a": 1}, {"local.a": 1}, [], "input local.a: 1 partition"),
    ({"local.a": 4}, {"local.a": 4}, [], "input local.a: 4 partitions"),
    ({"local.a": 4}, {"local.a": 6}, ["local.a"],
     "input local.a: reads 4 of its 6 partitions (held: read only up to where it had 4)"),
    ({"local.a": 2}, {"local.a": 4}, [],
     "input local.a: 2 partitions (the stream has 4 now: the job follows once its "
     "coordinator sees it)"),
    ({"local.a": 2}, {}, [], "input local.a: 2 partitions (the stream does not exist now)"),
], ids=["one", "four", "held", "growth-not-applied", "deleted"])
def test_an_input_line_shows_the_count_read_and_the_streams_own(
        counts: dict[str, int], now: dict[str, int], held: list[str], line: str) -> None:
    assert f"\n  {line}\n" in text(figures(counts, now, held))


@pytest.mark.parametrize(("stages", "shown"), [
    ((2, 1), "(changelog partition 0, 1 expansion barrier pending)"),
    ((3, 1), "(changelog partition 0, 2 expansion barriers pending)"),
    ((2, 2), "(changelog partition 0, expansion barrier passed)"),
])
def test_pending_barriers_are_counted_in_words(stages: tuple[int, int], shown: str) -> None:
    assert f"  Partition 0 on worker 0 {shown}\n" in text(
        figures({"local.words": 1}, {"local.words": 1}, [], stages))
