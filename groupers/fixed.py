"""Fixed tasks around any SSP grouper: keys keep their task when a stream expands (SEP-5).

`FixedTasks` wraps a grouper, as Samza's ``SSPGrouperProxy`` does: on a first run it
returns the wrapped grouper's tasks; afterwards every partition of a stream the previous
job model knew goes to the previous task of the partition its keys came from, so the
task set never changes on expansion. Streams new to the job are placed by the wrapped
grouper. `GroupByPartitionFixedTasks` and `GroupBySystemStreamPartitionFixedTasks` are
this wrapper around the two built-in groupers.

    >>> from groupers import GroupByPartition, ssp_task_mapping
    >>> from groupers import SystemStreamPartition as SSP
    >>> grouper = FixedTasks(GroupByPartition())
    >>> before = grouper.group([SSP("local", "events", p) for p in range(2)])
    >>> after = grouper.group([SSP("local", "events", p) for p in range(4)],
    ...                       ssp_task_mapping(before), previous_counts={"local.events": 2})
    >>> {task: sorted(ssp.partition for ssp in ssps) for task, ssps in after.items()}
    {'Partition 0': [0, 2], 'Partition 1': [1, 3]}
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Protocol

from groupers.errors import ExpansionError
from groupers.expansion import DefaultPartitionExpansionAlgorithm, PartitionExpansionAlgorithm
from groupers.model import SystemStreamPartition
from groupers.ssp import (
    GroupByPartition,
    GroupBySystemStreamPartition,
    Grouping,
    SspGrouper,
    finish_grouping,
    ssp_task_mapping,
    unique_ssps,
)

__all__ = [
    "ExpandingGrouper",
    "FixedTasks",
    "GroupByPartitionFixedTasks",
    "GroupBySystemStreamPartitionFixedTasks",
    "stream_name",
]

Placement = dict[SystemStreamPartition, str]


class ExpandingGrouper(Protocol):
    """A grouper that also takes the previous model's partition counts (every built-in one).

    ``previous_counts`` maps ``"system.stream"`` to the stream's partition count in the
    previous job model; groupers that do not keep tasks fixed ignore it.
    """

    def group(
        self,
        ssps: Iterable[SystemStreamPartition],
        previous: Mapping[SystemStreamPartition, str] | None = None,
        previous_counts: Mapping[str, int] | None = None,
    ) -> Grouping:
        """Task name → the SSPs it consumes, tasks in `task_sort_key` order."""
        ...

    def count_refusal(self, stream: str, previous: Mapping[int, str], previous_count: int,
                      count: int) -> ExpansionError | None:
        """Why `group` would refuse ``stream`` at ``count`` partitions, or None when it
        maps that count (pure: data in, answer out; nothing is grouped)."""
        ...


def stream_name(ssp: SystemStreamPartition) -> str:
    """``"system.stream"``: the key of ``previous_counts`` and of job models' counts."""
    return f"{ssp.system}.{ssp.stream}"


class FixedTasks:
    """Wrap ``base`` so that no key changes task when its input stream expands.

    For a stream in ``previous`` with ``n`` partitions then and ``count`` now, partition
    ``p`` goes to ``previous[(s, t, expansion.partition_before_expansion(p, count, d))]``
    where ``d`` is the fewest partitions the previous tasks are consistent with (the
    stream's initial count for the built-in groupers; ``n`` at most). A decrease, or a
    count the algorithm cannot map, raises `ExpansionError`. Pass ``previous_counts``
    from the previous job model; without it (the pinned two-argument call) ``n`` is taken
    as the highest partition in ``previous`` + 1.
    """

    def __init__(
        self, base: SspGrouper, expansion: PartitionExpansionAlgorithm | None = None
    ) -> None:
        self.base = base
        self.expansion: PartitionExpansionAlgorithm = (
            expansion if expansion is not None else DefaultPartitionExpansionAlgorithm()
        )

    def __repr__(self) -> str:
        return f"FixedTasks({self.base!r}, expansion={self.expansion!r})"

    def group(
        self,
        ssps: Iterable[SystemStreamPartition],
        previous: Mapping[SystemStreamPartition, str] | None = None,
        previous_counts: Mapping[str, int] | None = None,
    ) -> Grouping:
        """Group ``ssps`` so that no key changes task relative to ``previous``."""
        current = unique_ssps(ssps)
        if not previous:
            return finish_grouping(ssp_task_mapping(self.base.group(current)))
        before_by_stream: dict[str, dict[int, str]] = defaultdict(dict)
        for ssp, task in previous.items():
            ssp = SystemStreamPartition(*ssp)
            before_by_stream[stream_name(ssp)][ssp.partition] = task
        by_stream: dict[str, list[SystemStreamPartition]] = defaultdict(list)
        for ssp in current:
            by_stream[stream_name(ssp)].append(ssp)

        assignment: Placement = {}
        new_streams: dict[str, list[SystemStreamPartition]] = {}
        for name in sorted(by_stream):
            before = before_by_stream.get(name)
            if not before:
                new_streams[name] = by_stream[name]
                continue
            count = _previous_count(name, before, previous_counts)
            assignment.update(self._place_known_stream(name, by_stream[name], before, count))
        if new_streams:
            job_tasks = frozenset(previous.values())
            assignment.update(self._place_new_streams(current, new_streams, job_tasks))
        return finish_grouping(assignment)

    def count_refusal(self, stream: str, previous: Mapping[int, str], previous_count: int,
                      count: int) -> ExpansionError | None:
        """Why `group` refuses ``stream`` (``"system.stream"``) at ``count`` partitions,
        or None when its tasks map that count: the check `group` makes of every stream the
        previous model knew, alone (pure; no grouping is built).

        ``previous`` maps each of the stream's partitions in the previous model to its task
        (empty: a stream new to the job, which the wrapped grouper places, so any count
        maps); ``previous_count`` is its count there. A count below 1 is refused as a
        decrease (a stream with no partition would drop its tasks' keys).

            >>> grouper = GroupByPartitionFixedTasks()
            >>> tasks = {0: "Partition 0", 1: "Partition 1"}
            >>> grouper.count_refusal("local.e", tasks, 2, 6) is None
            True
            >>> print(grouper.count_refusal("local.e", tasks, 2, 3))  # doctest: +ELLIPSIS
            stream local.e: partition count went from 2 to 3, refused (2 tasks consume it): ...
        """
        if not previous:
            return None
        try:
            checked = _previous_count(stream, previous, {stream: previous_count})
            if count < 1:
                raise self._decrease(stream, checked, count, previous)
            self._origins(stream, previous, checked, count)
        except ExpansionError as error:
            return error
        return None

    def _place_known_stream(
        self, name: str, ssps: list[SystemStreamPartition], before: Mapping[int, str],
        previous_count: int,
    ) -> Placement:
        """Each SSP of a stream the previous model knew → the task its keys were in."""
        current_count = max(ssp.partition for ssp in ssps) + 1
        tasks = self._origins(name, before, previous_count, current_count)
        return {ssp: tasks[ssp.partition] for ssp in ssps}

    def _decrease(self, name: str, previous_count: int, current_count: int,
                  before: Mapping[int, str]) -> ExpansionError:
        return ExpansionError(
            f"stream {name}: partition count went from {previous_count} to "
            f"{current_count}; a decrease drops the keys of the removed partitions. "
            f"Restore {name} to {previous_count} partitions (or a multiple of "
            f"{self._origin_count(name, before, previous_count)}) — partition counts may "
            f"only grow"
        )

    def _origins(self, name: str, before: Mapping[int, str], previous_count: int,
                 current_count: int) -> dict[int, str]:
        """Partition → the task its keys were in, for ``current_count`` partitions of a
        stream the previous model knew; `ExpansionError` when its tasks cannot map it."""
        origin_count = self._origin_count(name, before, previous_count)
        if current_count < previous_count:
            raise self._decrease(name, previous_count, current_count, before)
        tasks = len(set(before.values()))
        placed: dict[int, str] = {}
        for partition in range(current_count):
            try:
                origin = self.expansion.partition_before_expansion(
                    partition, current_count, origin_count
                )
            except ExpansionError as error:
                raise ExpansionError(
                    f"stream {name}: partition count went from {previous_count} to "
                    f"{current_count}, refused ({tasks} tasks consume it): {error}"
                ) from error
            task = before.get(origin)
            if task is None:
                raise ExpansionError(
                    f"stream {name}: {self.expansion!r} sent partition {partition} of "
                    f"{current_count} to partition {origin}, which the previous job model "
                    f"does not have; fix the algorithm to return a partition below "
                    f"{origin_count}"
                )
            placed[partition] = task
        return placed

    def _origin_count(self, name: str, before: Mapping[int, str], previous_count: int) -> int:
        """The fewest partitions ``d`` (dividing ``previous_count``) the previous tasks
        respect: partition ``q`` shares its task with the ``d`` partition it maps back to.

        For the built-in groupers this is the stream's count when the job first saw it, so
        2 → 4 → 6 is accepted (6 is a multiple of 2); a grouper that put partitions 0, 1 of
        4 in one task gets ``d = 4``, and 4 → 6 is refused as it must be.
        """
        missing = [q for q in range(previous_count) if q not in before]
        if missing:
            raise ExpansionError(
                f"stream {name}: the previous job model gives it {previous_count} partitions "
                f"but no task for partition(s) {missing[:5]}; the SSP → task history is "
                f"incomplete — restore the coordinator stream or start the job afresh"
            )
        for candidate in range(1, previous_count + 1):
            if previous_count % candidate == 0 and self._respects(before, previous_count,
                                                                   candidate):
                return candidate
        raise ExpansionError(
            f"stream {name}: {self.expansion!r} does not map partition q of "
            f"{previous_count} to q itself; a PartitionExpansionAlgorithm must return "
            f"partitions below initial_count unchanged"
        )

    def _respects(self, before: Mapping[int, str], count: int, origin_count: int) -> bool:
        for partition in range(count):
            try:
                origin = self.expansion.partition_before_expansion(partition, count,
                                                                   origin_count)
            except ExpansionError:
                return False
            if before.get(origin) != before[partition]:
                return False
        return True

    def _place_new_streams(
        self, current: list[SystemStreamPartition],
        new_streams: Mapping[str, list[SystemStreamPartition]], job_tasks: frozenset[str],
    ) -> Placement:
        """Streams absent from ``previous``: where the wrapped grouper puts them now."""
        base = ssp_task_mapping(self.base.group(current))
        return {ssp: base[ssp] for ssps in new_streams.values() for ssp in ssps}


def _previous_count(name: str, before: Mapping[int, str],
                    previous_counts: Mapping[str, int] | None) -> int:
    """The stream's count in the previous model: given, or (pinned call) inferred."""
    inferred = max(before) + 1
    if previous_counts is None:
        return inferred
    count = previous_counts.get(name)
    if count is None:
        raise ExpansionError(
            f"stream {name}: previous_counts has no partition count for it, but the "
            f"previous SSP → task mapping has its partitions; pass the previous job "
            f"model's partition counts for every stream of its mapping"
        )
    if count < inferred:
        raise ExpansionError(
            f"stream {name}: the previous job model gives it {count} partitions but maps "
            f"partition {inferred - 1} to a task; its partition counts and SSP → task "
            f"mapping disagree — restore the coordinator stream or start the job afresh"
        )
    return count


class GroupByPartitionFixedTasks(FixedTasks):
    """`FixedTasks` around `GroupByPartition` (SEP-5's ``GroupByPartitionFixedTasks``).

    A stream added to a running job joins existing tasks by ``p % task_count`` when its
    count is a multiple of the job's task count (so it is co-partitioned with the
    rest); otherwise it is grouped as `GroupByPartition` would.
    """

    def __init__(self, expansion: PartitionExpansionAlgorithm | None = None) -> None:
        super().__init__(GroupByPartition(), expansion)

    def __repr__(self) -> str:
        return f"GroupByPartitionFixedTasks(expansion={self.expansion!r})"

    task_name = staticmethod(GroupByPartition.task_name)

    def _place_new_streams(
        self, current: list[SystemStreamPartition],
        new_streams: Mapping[str, list[SystemStreamPartition]], job_tasks: frozenset[str],
    ) -> Placement:
        placed: Placement = {}
        task_count = len(job_tasks)
        for ssps in new_streams.values():
            count = max(ssp.partition for ssp in ssps) + 1
            joined = {ssp: self.task_name(ssp._replace(partition=ssp.partition % task_count))
                      for ssp in ssps} if task_count and count % task_count == 0 else {}
            if joined and set(joined.values()) <= job_tasks:
                placed.update(joined)
            else:
                placed.update({ssp: self.task_name(ssp) for ssp in ssps})
        return placed


class GroupBySystemStreamPartitionFixedTasks(FixedTasks):
    """`FixedTasks` around `GroupBySystemStreamPartition`.

    After 4 → 8, ``(s, t, 5)`` joins ``"SystemStreamPartition [s, t, 1]"``. A stream added
    later gets one new task per partition, as the base grouper would: its tasks hold no
    other stream, so no co-partitioning is at stake.
    """

    def __init__(self, expansion: PartitionExpansionAlgorithm | None = None) -> None:
        super().__init__(GroupBySystemStreamPartition(), expansion)

    def __repr__(self) -> str:
        return f"GroupBySystemStreamPartitionFixedTasks(expansion={self.expansion!r})"

    task_name = staticmethod(GroupBySystemStreamPartition.task_name)
