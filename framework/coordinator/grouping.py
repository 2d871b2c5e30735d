"""The job's SSP grouper, and the check it answers for a partition change.

`make_grouper` is the grouper the builder groups with; `CountCheck` asks that grouper
whether the tasks of an input of a model can take a new partition count
(`groupers.ExpandingGrouper.count_refusal`: pure, no model is built), which is how the
decision about a change (`framework.coordinator.holds`) knows what a build would refuse.
"""

from __future__ import annotations

import groupers as G
from framework.config import JobConfig
from framework.importing import load_expansion_algorithm
from framework.metadata.jobmodel import JobModel

__all__ = ["CountCheck", "make_grouper"]


def make_grouper(config: JobConfig) -> G.ExpandingGrouper:
    """The SSP grouper the config asks for; fixed-task variants for stateful jobs."""
    fixed = config.expansion == "fixed-tasks" and config.stateful
    algorithm = load_expansion_algorithm(config)
    if config.grouper == "single":
        return G.AllSspToSingleTask()
    if config.grouper == "system-stream-partition":
        if fixed:
            return G.GroupBySystemStreamPartitionFixedTasks(expansion=algorithm)
        return G.GroupBySystemStreamPartition()
    if fixed:
        return G.GroupByPartitionFixedTasks(expansion=algorithm)
    return G.GroupByPartition()


class CountCheck:
    """Whether each input of ``model`` can take a count, answered by the job's grouper
    from ``model``'s SSP → task mapping and counts (each answer computed once)."""

    def __init__(self, config: JobConfig, model: JobModel) -> None:
        self._config = config
        self._model = model
        self._grouper: G.ExpandingGrouper | None = None
        self._tasks: dict[str, dict[int, str]] | None = None
        self._answers: dict[tuple[str, int], str | None] = {}

    def refusal(self, stream: str, count: int) -> str | None:
        """Why a model reading ``stream`` (``"system.stream"``, an input of the model) at
        ``count`` partitions cannot be built — the builder's own message — or None."""
        if (stream, count) not in self._answers:
            if self._grouper is None or self._tasks is None:
                self._grouper = make_grouper(self._config)
                self._tasks = {}
                for ssp, task in self._model.ssp_task_mapping().items():
                    self._tasks.setdefault(G.stream_name(ssp), {})[ssp.partition] = task
            error = self._grouper.count_refusal(
                stream, self._tasks.get(stream, {}), self._model.partition_counts[stream],
                count)
            self._answers[stream, count] = None if error is None else str(error)
        return self._answers[stream, count]
