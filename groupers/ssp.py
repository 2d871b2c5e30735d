"""SSP groupers: which task consumes which input partition (Samza SEP-5).

The base groupers (`GroupByPartition`, `GroupBySystemStreamPartition`,
`AllSspToSingleTask`) look only at the current partitions. Keeping keys on their tasks
across expansions is a separate behaviour wrapped around any of them (or a user's own):
`groupers.fixed.FixedTasks`.

    >>> from groupers import SystemStreamPartition as SSP
    >>> sorted(GroupByPartition().group([SSP("local", "events", p) for p in range(2)]))
    ['Partition 0', 'Partition 1']
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Protocol

from groupers.errors import ExpansionError
from groupers.model import SystemStreamPartition

__all__ = [
    "AllSspToSingleTask",
    "GroupByPartition",
    "GroupBySystemStreamPartition",
    "Grouping",
    "SspGrouper",
    "ssp_task_mapping",
    "task_sort_key",
]

Grouping = dict[str, frozenset[SystemStreamPartition]]


class SspGrouper(Protocol):
    """Groups input partitions into named tasks; ``previous`` is the last model's SSP → task."""

    def group(
        self,
        ssps: Iterable[SystemStreamPartition],
        previous: Mapping[SystemStreamPartition, str] | None = None,
    ) -> Grouping:
        """Task name → the SSPs it consumes, tasks in `task_sort_key` order."""
        ...


def task_sort_key(task: str) -> tuple[object, ...]:
    """Natural order for task names: ``Partition 2`` before ``Partition 10``."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", task))


def ssp_task_mapping(grouping: Mapping[str, Iterable[SystemStreamPartition]]) -> dict[
    SystemStreamPartition, str
]:
    """Invert a grouping into the SSP → task mapping the next `group` call takes."""
    mapping: dict[SystemStreamPartition, str] = {}
    for task, ssps in grouping.items():
        for ssp in ssps:
            if ssp in mapping:
                raise ExpansionError(f"{ssp} is in two tasks: {mapping[ssp]!r} and {task!r}")
            mapping[ssp] = task
    return dict(sorted(mapping.items()))


def finish_grouping(assignment: Mapping[SystemStreamPartition, str]) -> Grouping:
    """Collect SSP → task into task → frozenset, in a reproducible task order."""
    tasks: dict[str, set[SystemStreamPartition]] = defaultdict(set)
    for ssp, task in assignment.items():
        tasks[task].add(ssp)
    return {task: frozenset(tasks[task]) for task in sorted(tasks, key=task_sort_key)}


def unique_ssps(ssps: Iterable[SystemStreamPartition]) -> list[SystemStreamPartition]:
    return sorted({SystemStreamPartition(*ssp) for ssp in ssps})


class GroupByPartition:
    """Task ``"Partition {p}"`` consumes partition ``p`` of every input stream."""

    def group(
        self,
        ssps: Iterable[SystemStreamPartition],
        previous: Mapping[SystemStreamPartition, str] | None = None,
        previous_counts: Mapping[str, int] | None = None,
    ) -> Grouping:
        """Group by partition number; the previous model is ignored (see `FixedTasks`)."""
        return finish_grouping({ssp: self.task_name(ssp) for ssp in unique_ssps(ssps)})

    @staticmethod
    def task_name(ssp: SystemStreamPartition) -> str:
        """The task this grouper gives ``ssp`` when nothing has expanded."""
        return f"Partition {ssp.partition}"

    def count_refusal(self, stream: str, previous: Mapping[int, str], previous_count: int,
                      count: int) -> ExpansionError | None:
        """None: this grouper regroups on every model, so every count maps."""
        return None


class GroupBySystemStreamPartition:
    """One task per input partition, named ``"SystemStreamPartition [sys, stream, p]"``."""

    def group(
        self,
        ssps: Iterable[SystemStreamPartition],
        previous: Mapping[SystemStreamPartition, str] | None = None,
        previous_counts: Mapping[str, int] | None = None,
    ) -> Grouping:
        """One task per SSP; the previous model is ignored (see `FixedTasks`)."""
        return finish_grouping({ssp: self.task_name(ssp) for ssp in unique_ssps(ssps)})

    @staticmethod
    def task_name(ssp: SystemStreamPartition) -> str:
        """The task this grouper gives ``ssp`` when nothing has expanded."""
        return f"SystemStreamPartition [{ssp.system}, {ssp.stream}, {ssp.partition}]"

    def count_refusal(self, stream: str, previous: Mapping[int, str], previous_count: int,
                      count: int) -> ExpansionError | None:
        """None: this grouper regroups on every model, so every count maps."""
        return None


class AllSspToSingleTask:
    """Every input partition in one task, ``"Task-0"``: keys can never change task."""

    TASK = "Task-0"

    def group(
        self,
        ssps: Iterable[SystemStreamPartition],
        previous: Mapping[SystemStreamPartition, str] | None = None,
        previous_counts: Mapping[str, int] | None = None,
    ) -> Grouping:
        """One task holding everything (none if there is no input)."""
        return finish_grouping({ssp: self.TASK for ssp in unique_ssps(ssps)})

    def count_refusal(self, stream: str, previous: Mapping[int, str], previous_count: int,
                      count: int) -> ExpansionError | None:
        """None: this grouper regroups on every model, so every count maps."""
        return None
