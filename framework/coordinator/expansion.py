"""Where expansion happens: naming a partition change and the barrier stages of tasks
that gain partitions.

The model service decides a change (`framework.coordinator.decision`) and the builder
(`framework.coordinator.builder`) asks `barrier_stages` for the barriers of the one model
it builds; `framework.coordinator.expansion_book` records what happened in the status.
Workers enforce the barriers with `framework.metadata.jobmodel.BarrierStage.passed`, the one barrier
rule; status, metrics and re-key read their progress with `TaskModel.pending_stages` and
`TaskModel.held_behind_barrier`.
"""

from __future__ import annotations

from collections.abc import Mapping

from framework.metadata.jobmodel import BarrierStage, JobModel
from framework.systems.base import Checkpoint
from groupers import SystemStreamPartition

__all__ = ["barrier_stages", "describe_change", "merging_stages"]


def describe_change(before: Mapping[str, int], after: Mapping[str, int]) -> str:
    """``"local.words 2→4, ..."`` for the streams whose count changed (new streams excluded).

    >>> describe_change({"local.a": 2, "local.b": 3}, {"local.a": 4, "local.b": 3})
    'local.a 2→4'
    """
    return ", ".join(f"{s} {before[s]}→{c}" for s, c in sorted(after.items())
                     if s in before and before[s] != c)


def barrier_stages(
    task: str,
    ssps: frozenset[SystemStreamPartition],
    previous: JobModel | None,
    end_offsets: Mapping[SystemStreamPartition, int],
    checkpoint: Checkpoint | None,
    now_ms: int = 0,
) -> tuple[BarrierStage, ...]:
    """Barriers for a task that gained partitions, after any earlier stage not yet passed.

    The new stage holds the gained SSPs until the task's checkpoint reaches
    ``end_offsets`` (read after the workers stopped) on its old SSPs of the same streams:
    records written before the expansion are processed before any written after it.
    """
    before = previous.tasks.get(task) if previous else None
    if before is None:
        return ()
    done = checkpoint.inputs if checkpoint else {}
    stages = list(before.stages[len(before.stages) - before.pending_stages(done):])
    gained = ssps - before.ssps
    if gained:
        streams = {(s.system, s.stream) for s in gained}
        barrier = {s: end_offsets.get(s, 0) for s in sorted(before.ssps)
                   if (s.system, s.stream) in streams}
        stages.append(BarrierStage(barrier=barrier, held=frozenset(gained), at_ms=now_ms))
    return tuple(stages)


def merging_stages(
    task: str,
    previous: JobModel | None,
    checkpoint: Checkpoint | None,
    now_ms: int,
    window_ms: int,
) -> tuple[BarrierStage, ...]:
    """The task's stages passed by its checkpoint (earlier ones first) whose merge window
    (``window_ms`` from the stage's ``at_ms``) is still open at ``now_ms``: a worker that
    starts the task merges their gained partitions (`TaskModel.merging`)."""
    before = previous.tasks.get(task) if previous else None
    if before is None or window_ms <= 0:
        return ()
    done = checkpoint.inputs if checkpoint else {}
    passed = before.stages[:len(before.stages) - before.pending_stages(done)]
    return tuple(s for s in (*before.merging, *passed)
                 if s.at_ms and now_ms < s.at_ms + window_ms)
