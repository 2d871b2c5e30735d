"""The one decision about the inputs' partition counts, taken by every coordinator.

The model service (`framework.coordinator.model_service`), which the one-host coordinator
(at start and on every monitor pass) and the group leader of several hosts both call,
reads the inputs and calls `decide_partition_change`; it says which counts and holds the
next model takes, which expansion that applies, which inputs it holds or releases and the
refusal `sampan status` shows. It builds no model: what the job's tasks can map is asked
of the grouper (`framework.coordinator.grouping.CountCheck`), one stream and count at a
time. `ExpansionBook` (`framework.coordinator.expansion_book`) records the refusal and the
applied expansion the same way for both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from framework.config import JobConfig
from framework.coordinator.expansion import describe_change
from framework.coordinator.holds import InputNow, ReadPositions, plan_holds
from framework.metadata import ExpansionRecord, Refusal
from framework.metadata.jobmodel import JobModel, StreamHold

__all__ = ["PartitionDecision", "decide_partition_change"]


@dataclass(frozen=True)
class PartitionDecision:
    """What the next model does about the inputs' counts now: apply an expansion, hold
    (refuse) or release inputs, or keep the running model's counts and holds."""

    counts: dict[str, int]
    """The next model's input counts (a held input keeps the running model's)."""
    holds: dict[str, StreamHold]
    """The next model's holds."""
    expansion: str
    """The expansion applied (``"local.words 2→4"``); empty when no count changes."""
    toggled: tuple[str, ...]
    """Inputs the next model holds and the running one does not, or the reverse (sorted)."""
    refusal: Refusal | None
    """Why each held input is held and the fix, for the status; None when none is held."""
    changed: bool
    """Whether the next model differs from the running one (counts or holds)."""

    @property
    def what(self) -> str:
        """``"expansion local.words 2→4, hold local.events"``: the change, for the log and the
        model's reason."""
        return ", ".join([*([f"expansion {self.expansion}"] if self.expansion else []),
                          *(f"{'hold' if s in self.holds else 'release'} {s}"
                            for s in self.toggled)])

    def expansion_record(self, epoch: int, detected_ms: int, *, published_ms: int,
                         stopped_ms: int | None = None, started_ms: int | None = None,
                         in_place: bool = False) -> ExpansionRecord | None:
        """The status timeline's record of the applied expansion, published at ``epoch``;
        None when the decision applies none."""
        if not self.expansion:
            return None
        return ExpansionRecord(change=self.expansion, epoch=epoch, detected_ms=detected_ms,
                               workers_stopped_ms=stopped_ms, model_published_ms=published_ms,
                               workers_started_ms=started_ms, in_place=in_place)


def decide_partition_change(config: JobConfig, model: JobModel, counts: Mapping[str, int],
                            inputs: Mapping[str, InputNow], *, now_ms: int,
                            read: ReadPositions | None = None) -> PartitionDecision:
    """The next model's counts and holds against ``model`` (pure).

    ``counts`` are every input's counts now and ``inputs`` what the systems show of those
    whose count differs from ``model``'s or that it holds (`ModelService.inputs_now`);
    ``read`` where the job's checkpoints say it read them (`holds.read_positions`).
    """
    plan = plan_holds(config, model, counts, inputs, now_ms=now_ms, read=read)
    refusal = (Refusal(change=plan.change, error=plan.explain(config.path),
                       detected_ms=now_ms, counts=dict(counts)) if plan.held else None)
    expansion = describe_change(model.partition_counts, plan.counts)
    toggled = tuple(sorted(set(plan.holds) ^ set(model.holds)))
    changed = plan.counts != dict(model.partition_counts) or plan.holds != dict(model.holds)
    return PartitionDecision(plan.counts, plan.holds, expansion, toggled, refusal, changed)
