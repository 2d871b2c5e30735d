"""Value types shared by the groupers and the assignors: plain, immutable, hashable."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = [
    "ClientAssignment",
    "ClientState",
    "JoinAssignment",
    "JoinSubscription",
    "Subscription",
    "SystemStreamPartition",
    "TaskAssignment",
    "TopicPartition",
]


class SystemStreamPartition(NamedTuple):
    """One partition of one input stream of one system, e.g. ``("local", "events", 3)``."""

    system: str
    stream: str
    partition: int

    def __str__(self) -> str:
        return f"{self.system}.{self.stream}[{self.partition}]"


class TopicPartition(NamedTuple):
    """One partition of one topic, as the Kafka consumer-group assignors see it."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class Subscription:
    """A group member's subscription for the sticky and lag-aware assignors.

    ``owned`` is what the member held after the last rebalance, ``generation`` the
    group generation of that assignment (higher wins when two members claim the same
    partition; -1 means unknown).
    """

    topics: frozenset[str]
    owned: frozenset[TopicPartition] = frozenset()
    generation: int = -1

    def __init__(
        self,
        topics: Iterable[str],
        owned: Iterable[TopicPartition] = frozenset(),
        generation: int = -1,
    ) -> None:
        object.__setattr__(self, "topics", frozenset(topics))
        object.__setattr__(self, "owned", frozenset(TopicPartition(*tp) for tp in owned))
        object.__setattr__(self, "generation", int(generation))


@dataclass(frozen=True)
class JoinSubscription:
    """A member's subscription for the stream-join sticky assignor (KIP-315).

    ``owned`` holds partition *numbers* (a number means that partition of every
    subscribed topic); ``epoch`` is the epoch of the assignment that gave them.
    """

    topics: frozenset[str]
    owned: frozenset[int] = frozenset()
    epoch: int = -1

    def __init__(
        self, topics: Iterable[str], owned: Iterable[int] = frozenset(), epoch: int = -1
    ) -> None:
        object.__setattr__(self, "topics", frozenset(topics))
        object.__setattr__(self, "owned", frozenset(int(p) for p in owned))
        object.__setattr__(self, "epoch", int(epoch))


@dataclass(frozen=True)
class JoinAssignment:
    """What the stream-join sticky assignor gives one member."""

    partition_numbers: tuple[int, ...]
    topic_partitions: tuple[TopicPartition, ...]
    epoch: int


@dataclass(frozen=True)
class ClientState:
    """What a client (worker) reports to the high-availability assignor (KIP-441).

    ``capacity`` is its number of threads; ``previous_active`` the tasks it ran as
    active; ``task_lags`` maps a task to the restore gap of the local state it holds
    (0 = caught up). A task absent from ``task_lags`` has no local state there.
    """

    capacity: int = 1
    previous_active: frozenset[str] = frozenset()
    task_lags: Mapping[str, int] = field(default_factory=dict)

    def __init__(
        self,
        capacity: int = 1,
        previous_active: Iterable[str] = frozenset(),
        task_lags: Mapping[str, int] | None = None,
    ) -> None:
        object.__setattr__(self, "capacity", int(capacity))
        object.__setattr__(self, "previous_active", frozenset(previous_active))
        object.__setattr__(self, "task_lags", dict(task_lags or {}))

    def __hash__(self) -> int:
        return hash((self.capacity, self.previous_active, tuple(sorted(self.task_lags.items()))))


@dataclass(frozen=True)
class ClientAssignment:
    """The tasks one client runs: actives, standbys (hot replicas) and warmups."""

    active: frozenset[str] = frozenset()
    standby: frozenset[str] = frozenset()
    warmup: frozenset[str] = frozenset()


@dataclass(frozen=True)
class TaskAssignment:
    """The high-availability assignor's result for the whole group."""

    clients: Mapping[str, ClientAssignment]
    probing_rebalance_needed: bool
