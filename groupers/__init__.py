"""Pure grouping and assignment algorithms for sampan: no I/O, no asyncio, deterministic.

SSP groupers (Samza SEP-5) decide which task consumes which input partition; `FixedTasks`
wrapped around any of them keeps a key on its task when a stream expands; the assignors
(KIP-54, KIP-315, KAFKA-5337, KIP-441) place partitions or tasks on group members.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from groupers.errors import AssignmentError, ExpansionError, GrouperError
from groupers.expansion import DefaultPartitionExpansionAlgorithm, PartitionExpansionAlgorithm
from groupers.fixed import (
    ExpandingGrouper,
    FixedTasks,
    GroupByPartitionFixedTasks,
    GroupBySystemStreamPartitionFixedTasks,
    stream_name,
)
from groupers.model import (
    ClientAssignment,
    ClientState,
    JoinAssignment,
    JoinSubscription,
    Subscription,
    SystemStreamPartition,
    TaskAssignment,
    TopicPartition,
)
from groupers.ssp import (
    AllSspToSingleTask,
    GroupByPartition,
    GroupBySystemStreamPartition,
    Grouping,
    SspGrouper,
    ssp_task_mapping,
    task_sort_key,
)

if TYPE_CHECKING:
    from groupers.assignors.high_availability import HighAvailabilityTaskAssignor
    from groupers.assignors.lag_aware import LagAwareAssignor, partition_lag
    from groupers.assignors.sticky import StickyAssignor
    from groupers.assignors.stream_join import StreamJoinStickyAssignor

_ASSIGNORS = {
    "HighAvailabilityTaskAssignor": "groupers.assignors.high_availability",
    "LagAwareAssignor": "groupers.assignors.lag_aware",
    "partition_lag": "groupers.assignors.lag_aware",
    "StickyAssignor": "groupers.assignors.sticky",
    "StreamJoinStickyAssignor": "groupers.assignors.stream_join",
}
"""The assignors, imported when first named: every sampan process imports this package
for `SystemStreamPartition` and the groupers, and none of them places tasks with these."""


def __getattr__(name: str) -> Any:
    module = _ASSIGNORS.get(name)
    if module is None:
        raise AttributeError(f"module 'groupers' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "AllSspToSingleTask",
    "AssignmentError",
    "ClientAssignment",
    "ClientState",
    "DefaultPartitionExpansionAlgorithm",
    "ExpandingGrouper",
    "ExpansionError",
    "FixedTasks",
    "GroupByPartition",
    "GroupByPartitionFixedTasks",
    "GroupBySystemStreamPartition",
    "GroupBySystemStreamPartitionFixedTasks",
    "GrouperError",
    "Grouping",
    "HighAvailabilityTaskAssignor",
    "JoinAssignment",
    "JoinSubscription",
    "LagAwareAssignor",
    "PartitionExpansionAlgorithm",
    "SspGrouper",
    "StickyAssignor",
    "StreamJoinStickyAssignor",
    "Subscription",
    "SystemStreamPartition",
    "TaskAssignment",
    "TopicPartition",
    "partition_lag",
    "ssp_task_mapping",
    "stream_name",
    "task_sort_key",
]
