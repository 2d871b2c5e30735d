"""Where expansion happens: naming a partition change, the barrier stages of tasks that
gain partitions, and the bookkeeping of applied and refused changes.

The coordinator detects a change by comparing partition counts with its model's; the
builder (`framework.coordinator.builder`) validates it through the fixed-task grouper and
asks `barrier_stages` for the barriers; `ExpansionBook` records what happened in the
coordinator's status for `sampan status` and the drill, with the inputs held after a
change their tasks cannot map (`framework.coordinator.holds`). Workers enforce the
barriers with `framework.jobmodel.BarrierStage.passed`, the one barrier rule.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from framework.jobmodel import BarrierStage, JobModel
from framework.metadata import CoordinatorStatus, ExpansionRecord, Refusal
from framework.systems.base import Checkpoint
from groupers import SystemStreamPartition

if TYPE_CHECKING:
    from framework.coordinator.holds import HoldPlan

__all__ = [
    "ExpansionBook",
    "barrier_stages",
    "describe_change",
]

log = logging.getLogger(__name__)


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
    stages = list(before.stages)
    while stages and stages[0].passed(done):
        stages.pop(0)
    gained = ssps - before.ssps
    if gained:
        streams = {(s.system, s.stream) for s in gained}
        barrier = {s: end_offsets.get(s, 0) for s in sorted(before.ssps)
                   if (s.system, s.stream) in streams}
        stages.append(BarrierStage(barrier=barrier, held=frozenset(gained)))
    return tuple(stages)


class ExpansionBook:
    """The coordinator's record of applied expansions and held inputs (in its status)."""

    def __init__(self, status: CoordinatorStatus, job_path: Path) -> None:
        self.status = status
        self.job_path = job_path

    def holding(self, plan: HoldPlan, counts: Mapping[str, int], detected_ms: int,
                epoch: int) -> bool:
        """Record the inputs ``plan`` holds (logged once per distinct change), or clear the
        refusal when it holds none; True when the status changed."""
        if not plan.held:
            return self.clear_refusal(epoch)
        change, error = plan.change, plan.explain(self.job_path)
        known = self.status.refusal
        if known is not None and (known.change, known.error, known.counts) == (
                change, error, dict(counts)):
            return False
        log.error("REFUSED partition change %s: %s. The job keeps running on epoch %d",
                  change, error, epoch)
        self.status.refusal = Refusal(change=change, error=error, detected_ms=detected_ms,
                                      counts=dict(counts))
        return True

    def clear_refusal(self, epoch: int) -> bool:
        """Forget a refusal once no input is held any more; True if there was one."""
        if self.status.refusal is None:
            return False
        log.info("no input is held any more (epoch %d); refusal cleared", epoch)
        self.status.refusal = None
        return True

    def applied(self, record: ExpansionRecord) -> None:
        """Record an applied expansion in the status timeline."""
        self.status.expansions.append(record)
