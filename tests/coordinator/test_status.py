"""`sampan status` reads barrier progress from the checkpoints, not from the model alone."""

from __future__ import annotations

from framework.coordinator.expansion import held_behind_barrier
from framework.jobmodel import BarrierStage, TaskModel
from groupers import SystemStreamPartition as SSP


def ssp(p: int) -> SSP:
    return SSP("local", "words", p)


TASK = TaskModel(
    name="Partition 0", ssps=frozenset(ssp(p) for p in (0, 2, 4, 6)), changelog_partition=0,
    worker=0, stages=(BarrierStage({ssp(0): 100}, frozenset({ssp(2)})),
                      BarrierStage({ssp(0): 150, ssp(2): 40}, frozenset({ssp(4), ssp(6)}))))


def test_nothing_checkpointed_holds_every_stage() -> None:
    assert held_behind_barrier(TASK, {}) == {ssp(2), ssp(4), ssp(6)}


def test_first_stage_passed_holds_only_the_second() -> None:
    assert held_behind_barrier(TASK, {ssp(0): 120, ssp(2): 5}) == {ssp(4), ssp(6)}


def test_stages_are_released_in_order() -> None:
    """The second barrier's offsets reached does not release it before the first."""
    assert held_behind_barrier(TASK, {ssp(0): 99, ssp(2): 40}) == {ssp(2), ssp(4), ssp(6)}


def test_every_stage_passed_holds_nothing() -> None:
    assert held_behind_barrier(TASK, {ssp(0): 150, ssp(2): 40}) == frozenset()
