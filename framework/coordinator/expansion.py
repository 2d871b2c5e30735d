"""Where expansion happens: naming a partition change, the barrier stages of tasks that
gain partitions, and the bookkeeping of applied and refused changes.

Every coordinator (one host or several) decides a change with
`framework.coordinator.decision.decide_partition_change`; the builder
(`framework.coordinator.builder`) validates it through the fixed-task grouper and asks
`barrier_stages` for the barriers; `ExpansionBook` records what happened in the
coordinator's status for `sampan status` and the drill: the expansions applied and the
refusal of inputs held after a change their tasks cannot map
(`framework.coordinator.holds`). Workers enforce the barriers with
`framework.jobmodel.BarrierStage.passed`, the one barrier rule; status, metrics and re-key
read their progress with `TaskModel.pending_stages` and `TaskModel.held_behind_barrier`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from framework.jobmodel import BarrierStage, JobModel
from framework.metadata import CoordinatorStatus, ExpansionRecord
from framework.systems.base import Checkpoint
from groupers import SystemStreamPartition

if TYPE_CHECKING:
    from framework.coordinator.decision import PartitionDecision

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

    def __init__(self, status: CoordinatorStatus) -> None:
        self.status = status

    def note(self, decision: PartitionDecision, epoch: int) -> bool:
        """Record the refusal of ``decision`` (logged once per distinct change), or clear
        the refusal when it holds no input; True when the status changed."""
        refusal = decision.refusal
        if refusal is None:
            return self.clear_refusal(epoch)
        known = self.status.refusal
        if known is not None and (known.change, known.error, known.counts) == (
                refusal.change, refusal.error, refusal.counts):
            return False
        log.error("REFUSED partition change %s: %s. The job keeps running on epoch %d",
                  refusal.change, refusal.error, epoch)
        self.status.refusal = refusal
        return True

    def clear_refusal(self, epoch: int) -> bool:
        """Forget a refusal once no input is held any more; True if there was one."""
        if self.status.refusal is None:
            return False
        log.info("no input is held any more (epoch %d); refusal cleared", epoch)
        self.status.refusal = None
        return True

    def applied(self, record: ExpansionRecord | None) -> bool:
        """Record an applied expansion in the status timeline (None: none applied); True
        when the status changed."""
        if record is None:
            return False
        self.status.expansions.append(record)
        return True
