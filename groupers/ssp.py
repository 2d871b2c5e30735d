"""SSP groupers: which task consumes which input partition (Samza SEP-5).

The base groupers (`GroupByPartition`, `GroupBySystemStreamPartition`,
`AllSspToSingleTask`) look only at the current partitions. The fixed-task variants also
take the previous job model's SSP → task mapping and keep the number of tasks per
stream fixed, so that a key stays on its task when its stream expands from ``n`` to
``k·n`` partitions.

    >>> from groupers import SystemStreamPartition as SSP
    >>> before = GroupByPartitionFixedTasks().group([SSP("local", "events", p) for p in range(2)])
    >>> previous = ssp_task_mapping(before)
    >>> after = GroupByPartitionFixedTasks().group(
    ...     [SSP("local", "events", p) for p in range(4)], previous)
    >>> sorted(ssp.partition for ssp in after["Partition 1"])
    [1, 3]
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Protocol

from groupers.errors import ExpansionError
from groupers.expansion import DefaultPartitionExpansionAlgorithm, PartitionExpansionAlgorithm
from groupers.model import SystemStreamPartition

__all__ = [
    "AllSspToSingleTask",
    "GroupByPartition",
    "GroupByPartitionFixedTasks",
    "GroupBySystemStreamPartition",
    "GroupBySystemStreamPartitionFixedTasks",
    "SspGrouper",
    "ssp_task_mapping",
    "task_sort_key",
]

Grouping = dict[str, frozenset[SystemStreamPartition]]
StreamKey = tuple[str, str]


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


def _finish(assignment: Mapping[SystemStreamPartition, str]) -> Grouping:
    """Collect SSP → task into task → frozenset, in a reproducible task order."""
    tasks: dict[str, set[SystemStreamPartition]] = defaultdict(set)
    for ssp, task in assignment.items():
        tasks[task].add(ssp)
    return {task: frozenset(tasks[task]) for task in sorted(tasks, key=task_sort_key)}


def _unique(ssps: Iterable[SystemStreamPartition]) -> list[SystemStreamPartition]:
    return sorted({SystemStreamPartition(*ssp) for ssp in ssps})


class GroupByPartition:
    """Task ``"Partition {p}"`` consumes partition ``p`` of every input stream."""

    def group(
        self,
        ssps: Iterable[SystemStreamPartition],
        previous: Mapping[SystemStreamPartition, str] | None = None,
    ) -> Grouping:
        """Group by partition number; ``previous`` is ignored (see the fixed-task variant)."""
        return _finish({ssp: self.task_name(ssp) for ssp in _unique(ssps)})

    @staticmethod
    def task_name(ssp: SystemStreamPartition) -> str:
        """The task this grouper gives ``ssp`` when nothing has expanded."""
        return f"Partition {ssp.partition}"


class GroupBySystemStreamPartition:
    """One task per input partition, named ``"SystemStreamPartition [sys, stream, p]"``."""

    def group(
        self,
        ssps: Iterable[SystemStreamPartition],
        previous: Mapping[SystemStreamPartition, str] | None = None,
    ) -> Grouping:
        """One task per SSP; ``previous`` is ignored (see the fixed-task variant)."""
        return _finish({ssp: self.task_name(ssp) for ssp in _unique(ssps)})

    @staticmethod
    def task_name(ssp: SystemStreamPartition) -> str:
        """The task this grouper gives ``ssp`` when nothing has expanded."""
        return f"SystemStreamPartition [{ssp.system}, {ssp.stream}, {ssp.partition}]"


class AllSspToSingleTask:
    """Every input partition in one task, ``"Task-0"``: keys can never change task."""

    TASK = "Task-0"

    def group(
        self,
        ssps: Iterable[SystemStreamPartition],
        previous: Mapping[SystemStreamPartition, str] | None = None,
    ) -> Grouping:
        """One task holding everything (none if there is no input)."""
        return _finish({ssp: self.TASK for ssp in _unique(ssps)})


class _FixedTasks(ABC):
    """SEP-5's fixed-task rule around a base grouper's task naming.

    A stream seen in ``previous`` keeps the number of tasks consuming it: SSP
    ``(s, t, p)`` goes to the task that owned ``(s, t, partition_before_expansion(p,
    count, tasks_for_stream))``. A stream new to ``previous`` is handled by
    `_place_new_stream`.
    """

    def __init__(self, expansion: PartitionExpansionAlgorithm | None = None) -> None:
        self.expansion: PartitionExpansionAlgorithm = (
            expansion if expansion is not None else DefaultPartitionExpansionAlgorithm()
        )

    @abstractmethod
    def task_name(self, ssp: SystemStreamPartition) -> str:
        """The base grouper's task for ``ssp``."""

    def group(
        self,
        ssps: Iterable[SystemStreamPartition],
        previous: Mapping[SystemStreamPartition, str] | None = None,
    ) -> Grouping:
        """Group ``ssps`` so that no key changes task relative to ``previous``."""
        current = _unique(ssps)
        if not previous:
            return _finish({ssp: self.task_name(ssp) for ssp in current})
        previous = {SystemStreamPartition(*ssp): task for ssp, task in previous.items()}
        by_stream: dict[StreamKey, list[SystemStreamPartition]] = defaultdict(list)
        for ssp in current:
            by_stream[(ssp.system, ssp.stream)].append(ssp)
        previous_by_stream: dict[StreamKey, dict[int, str]] = defaultdict(dict)
        for ssp, task in previous.items():
            previous_by_stream[(ssp.system, ssp.stream)][ssp.partition] = task
        job_tasks = frozenset(previous.values())

        assignment: dict[SystemStreamPartition, str] = {}
        for stream in sorted(by_stream):
            stream_ssps = by_stream[stream]
            before = previous_by_stream.get(stream)
            if before:
                assignment.update(self._place_known_stream(stream, stream_ssps, before))
            else:
                assignment.update(self._place_new_stream(stream_ssps, job_tasks))
        return _finish(assignment)

    def _place_known_stream(
        self, stream: StreamKey, ssps: list[SystemStreamPartition], before: Mapping[int, str]
    ) -> dict[SystemStreamPartition, str]:
        name = f"{stream[0]}.{stream[1]}"
        previous_count = max(before) + 1
        current_count = max(ssp.partition for ssp in ssps) + 1
        if current_count < previous_count:
            raise ExpansionError(
                f"stream {name}: partition count went from {previous_count} to "
                f"{current_count}; a decrease drops the keys of the removed partitions. "
                f"Restore {name} to {previous_count} partitions (or a multiple of "
                f"{len(set(before.values()))}) — partition counts may only grow"
            )
        tasks_for_stream = len(set(before.values()))
        placed: dict[SystemStreamPartition, str] = {}
        for ssp in ssps:
            try:
                origin = self.expansion.partition_before_expansion(
                    ssp.partition, current_count, tasks_for_stream
                )
            except ExpansionError as error:
                raise ExpansionError(
                    f"stream {name}: partition count went from {previous_count} to "
                    f"{current_count}, refused ({tasks_for_stream} tasks consume it): {error}"
                ) from error
            task = before.get(origin)
            if task is None:
                raise ExpansionError(
                    f"stream {name}: the previous job model has no task for partition "
                    f"{origin}, where partition {ssp.partition}'s keys began; the SSP → task "
                    f"history is incomplete — restore the coordinator stream or start the "
                    f"job afresh"
                )
            placed[ssp] = task
        return placed

    def _place_new_stream(
        self, ssps: list[SystemStreamPartition], job_tasks: frozenset[str]
    ) -> dict[SystemStreamPartition, str]:
        """A stream absent from ``previous``: the base grouper's tasks."""
        return {ssp: self.task_name(ssp) for ssp in ssps}


class GroupByPartitionFixedTasks(_FixedTasks):
    """`GroupByPartition` that keeps every key on its task across expansions (SEP-5).

    A stream added to a running job joins existing tasks by ``p % task_count`` when its
    count is a multiple of the job's task count (so it is co-partitioned with the
    rest); otherwise it is grouped as `GroupByPartition` would.
    """

    def task_name(self, ssp: SystemStreamPartition) -> str:
        return GroupByPartition.task_name(ssp)

    def _place_new_stream(
        self, ssps: list[SystemStreamPartition], job_tasks: frozenset[str]
    ) -> dict[SystemStreamPartition, str]:
        task_count = len(job_tasks)
        count = max(ssp.partition for ssp in ssps) + 1
        if task_count and count % task_count == 0:
            placed = {ssp: self.task_name(ssp._replace(partition=ssp.partition % task_count))
                      for ssp in ssps}
            if set(placed.values()) <= job_tasks:
                return placed
        return super()._place_new_stream(ssps, job_tasks)


class GroupBySystemStreamPartitionFixedTasks(_FixedTasks):
    """`GroupBySystemStreamPartition` that keeps every key on its task across expansions.

    After 4 → 8, ``(s, t, 5)`` joins ``"SystemStreamPartition [s, t, 1]"``. A stream added
    later gets one new task per partition, as the base grouper would: its tasks hold no
    other stream, so no co-partitioning is at stake.
    """

    def task_name(self, ssp: SystemStreamPartition) -> str:
        return GroupBySystemStreamPartition.task_name(ssp)
