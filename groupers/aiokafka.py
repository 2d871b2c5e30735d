"""The `groupers` assignors as aiokafka partition assignment strategies.

The only module of `groupers` that imports aiokafka. It translates between Kafka's
consumer protocol (member metadata in, member assignments out) and the pure assignors:

* `StickyPartitionAssignor` ("sampan-sticky") → `StickyAssignor` (KIP-54);
* `StreamJoinStickyPartitionAssignor` ("sampan-stream-join") → `StreamJoinStickyAssignor`
  (KIP-315): a member gets the same partition numbers of every subscribed topic;
* `LagAwarePartitionAssignor` ("sampan-lag-aware") → `LagAwareAssignor` (KAFKA-5337),
  with lags from an application-supplied `LagSource` (none → every lag 0).

aiokafka calls strategies as classes, so what a member owns lives on the class. **One
class per consumer**: a process with several consumers gives each its own class from
`make_sticky_assignor()` / `make_stream_join_assignor()` / `make_lag_aware_assignor()`;
the exported classes themselves suit a process with a single consumer. The user_data
encoding is in `groupers.aiokafka_userdata`; see `docs/groupers/aiokafka.md`.

Generations and epochs are the assignor's own, stamped by the leader (the highest a member
reports, plus one) and carried in the assignment's user_data: aiokafka does not tell an
assignor the broker's group generation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from groupers.aiokafka_userdata import (
    UNKNOWN,
    OwnedNumbers,
    OwnedPartitions,
    decode_join_assignment,
    decode_join_metadata,
    decode_sticky_assignment,
    decode_sticky_metadata,
    encode_join_assignment,
    encode_join_metadata,
    encode_sticky_assignment,
    encode_sticky_metadata,
)
from groupers.assignors.lag_aware import LagAwareAssignor
from groupers.assignors.sticky import StickyAssignor
from groupers.assignors.stream_join import StreamJoinStickyAssignor
from groupers.model import JoinSubscription, Subscription, TopicPartition

__all__ = [
    "LagAwarePartitionAssignor",
    "LagSource",
    "StickyPartitionAssignor",
    "StreamJoinStickyPartitionAssignor",
    "make_lag_aware_assignor",
    "make_sticky_assignor",
    "make_stream_join_assignor",
    "partition_counts",
]

log = logging.getLogger(__name__)

LagSource = Callable[[Sequence[TopicPartition]], Mapping[TopicPartition, int]]
"""Lag of each partition for the group, asked for by the leader during a rebalance.

Called synchronously inside the event loop, so it must answer at once (e.g. from a
snapshot the application refreshes; see `partition_lag`). Missing partitions count as
lag 0; a raising source, or a lag that is not an int >= 0, is logged and counts as 0.
"""

PROTOCOL_VERSION = 0
"""Version field of the consumer protocol structs; our user_data has its own ``"v"``."""


def partition_counts(cluster: Any, topics: Iterable[str]) -> dict[str, int]:
    """Topic → partition count from aiokafka's ``ClusterMetadata``; unknown topics → 0."""
    counts: dict[str, int] = {}
    for topic in sorted(set(topics)):
        partitions = cluster.partitions_for_topic(topic)
        if not partitions:
            log.warning("no partition metadata for topic %r; assigning none of it", topic)
        counts[topic] = len(partitions) if partitions else 0
    return counts


def _member_assignment(partitions: Iterable[TopicPartition], user_data: bytes) -> Any:
    """The consumer protocol assignment: partitions grouped by topic, both sorted."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return ConsumerProtocolMemberAssignment(
        PROTOCOL_VERSION, sorted(by_topic.items()), user_data
    )


def _assigned_partitions(assignment: Any) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(topic, p) for topic, p in assignment.partitions())


class StickyPartitionAssignor(AbstractPartitionAssignor):  # type: ignore[misc]
    """KIP-54 sticky strategy "sampan-sticky"; state: what this consumer owns, generation.

    Use the class itself for the one consumer of a process, `make_sticky_assignor()` for
    each of several.
    """

    name = "sampan-sticky"
    version = PROTOCOL_VERSION
    _owned: ClassVar[OwnedPartitions] = OwnedPartitions(frozenset(), UNKNOWN)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._owned = OwnedPartitions(frozenset(), UNKNOWN)  # a new consumer owns nothing

    @classmethod
    def owned(cls) -> OwnedPartitions:
        """What this consumer's last assignment gave it, as its next metadata reports."""
        return cls._owned

    @classmethod
    def metadata(cls, topics: Iterable[str]) -> Any:
        """JoinGroup metadata: subscribed topics, owned partitions and their generation."""
        user_data = encode_sticky_metadata(cls._owned.partitions, cls._owned.generation)
        return ConsumerProtocolMemberMetadata(cls.version, sorted(topics), user_data)

    @classmethod
    def assign(cls, cluster: Any, members: Mapping[str, Any]) -> dict[str, Any]:
        """Leader: decode every member's claims, run `StickyAssignor`, stamp generation+1."""
        subscriptions: dict[str, Subscription] = {}
        for member_id, metadata in members.items():
            claim = decode_sticky_metadata(metadata.user_data)
            subscriptions[member_id] = Subscription(
                metadata.subscription, claim.partitions, claim.generation
            )
        topics = {t for s in subscriptions.values() for t in s.topics}
        result = StickyAssignor().assign(partition_counts(cluster, topics), subscriptions)
        generation = max((s.generation for s in subscriptions.values()), default=UNKNOWN) + 1
        user_data = encode_sticky_assignment(generation)
        return {member: _member_assignment(tps, user_data) for member, tps in result.items()}

    @classmethod
    def on_assignment(cls, assignment: Any) -> None:
        """Member: remember the partitions and generation for the next `metadata`."""
        cls._owned = OwnedPartitions(
            _assigned_partitions(assignment), decode_sticky_assignment(assignment.user_data)
        )


class StreamJoinStickyPartitionAssignor(AbstractPartitionAssignor):  # type: ignore[misc]
    """KIP-315 strategy "sampan-stream-join"; state: owned partition numbers and epoch.

    Use the class itself for the one consumer of a process, `make_stream_join_assignor()`
    for each of several.
    """

    name = "sampan-stream-join"
    version = PROTOCOL_VERSION
    _owned: ClassVar[OwnedNumbers] = OwnedNumbers(frozenset(), UNKNOWN)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._owned = OwnedNumbers(frozenset(), UNKNOWN)

    @classmethod
    def owned(cls) -> OwnedNumbers:
        """The partition numbers and epoch of this consumer's last assignment."""
        return cls._owned

    @classmethod
    def metadata(cls, topics: Iterable[str]) -> Any:
        """JoinGroup metadata: subscribed topics, owned partition numbers and epoch."""
        user_data = encode_join_metadata(cls._owned.numbers, cls._owned.epoch)
        return ConsumerProtocolMemberMetadata(cls.version, sorted(topics), user_data)

    @classmethod
    def assign(cls, cluster: Any, members: Mapping[str, Any]) -> dict[str, Any]:
        """Leader: run `StreamJoinStickyAssignor`; each assignment carries numbers + epoch."""
        subscriptions: dict[str, JoinSubscription] = {}
        for member_id, metadata in members.items():
            claim = decode_join_metadata(metadata.user_data)
            subscriptions[member_id] = JoinSubscription(
                metadata.subscription, claim.numbers, claim.epoch
            )
        topics = {t for s in subscriptions.values() for t in s.topics}
        result = StreamJoinStickyAssignor().assign(
            partition_counts(cluster, topics), subscriptions
        )
        return {
            member: _member_assignment(
                given.topic_partitions, encode_join_assignment(given.partition_numbers, given.epoch)
            )
            for member, given in result.items()
        }

    @classmethod
    def on_assignment(cls, assignment: Any) -> None:
        """Member: remember the numbers and epoch; unreadable user_data → numbers seen, -1."""
        given = decode_join_assignment(assignment.user_data)
        if given.epoch == UNKNOWN:
            numbers = frozenset(tp.partition for tp in _assigned_partitions(assignment))
            given = OwnedNumbers(numbers, UNKNOWN)
        cls._owned = given


class LagAwarePartitionAssignor(AbstractPartitionAssignor):  # type: ignore[misc]
    """KAFKA-5337 strategy "sampan-lag-aware": not sticky; lags from ``lag_source``.

    Without a source (the exported class) every lag is 0 and the result is count-balanced
    only; `make_lag_aware_assignor(source)` makes a class that asks ``source`` for lags.
    """

    name = "sampan-lag-aware"
    version = PROTOCOL_VERSION
    lag_source: ClassVar[LagSource | None] = None

    @classmethod
    def metadata(cls, topics: Iterable[str]) -> Any:
        """JoinGroup metadata: subscribed topics; empty user_data (nothing is sticky)."""
        return ConsumerProtocolMemberMetadata(cls.version, sorted(topics), b"")

    @classmethod
    def assign(cls, cluster: Any, members: Mapping[str, Any]) -> dict[str, Any]:
        """Leader: ask ``lag_source`` for the lags of every partition, run `LagAwareAssignor`."""
        subscriptions = {member: Subscription(md.subscription) for member, md in members.items()}
        counts = partition_counts(cluster, {t for s in subscriptions.values() for t in s.topics})
        partitions = [TopicPartition(t, p) for t in sorted(counts) for p in range(counts[t])]
        lags = _ask_lags(cls.lag_source, partitions)
        result = LagAwareAssignor().assign(counts, subscriptions, lags)
        return {member: _member_assignment(tps, b"") for member, tps in result.items()}

    @classmethod
    def on_assignment(cls, assignment: Any) -> None:
        """Nothing to remember: the lag-aware assignor is not sticky."""


def _ask_lags(
    source: LagSource | None, partitions: Sequence[TopicPartition]
) -> dict[TopicPartition, int]:
    """The source's lags for ``partitions``; failures and invalid values count as lag 0."""
    if source is None or not partitions:
        return {}
    try:
        given = source(list(partitions))
        lags = {tp: given.get(tp, 0) for tp in partitions}
    except Exception:  # a broken source must not fail the rebalance
        log.exception("lag source %r failed; assigning as if every lag were 0", source)
        return {}
    invalid = sorted(tp for tp, lag in lags.items()
                     if not isinstance(lag, int) or isinstance(lag, bool) or lag < 0)
    if invalid:
        log.warning("lag source %r gave no valid lag (an int >= 0) for %s; using 0",
                    source, ", ".join(map(str, invalid)))
    return {tp: lag for tp, lag in lags.items() if tp not in invalid}


def make_sticky_assignor() -> type[StickyPartitionAssignor]:
    """A fresh "sampan-sticky" strategy class for one consumer, owning nothing yet."""

    class PerConsumerStickyPartitionAssignor(StickyPartitionAssignor):
        """"sampan-sticky" for one consumer (see `StickyPartitionAssignor`)."""

    return PerConsumerStickyPartitionAssignor


def make_stream_join_assignor() -> type[StreamJoinStickyPartitionAssignor]:
    """A fresh "sampan-stream-join" strategy class for one consumer, owning nothing yet."""

    class PerConsumerStreamJoinStickyPartitionAssignor(StreamJoinStickyPartitionAssignor):
        """"sampan-stream-join" for one consumer (see `StreamJoinStickyPartitionAssignor`)."""

    return PerConsumerStreamJoinStickyPartitionAssignor


def make_lag_aware_assignor(
    lag_source: LagSource | None = None,
) -> type[LagAwarePartitionAssignor]:
    """A "sampan-lag-aware" strategy class whose leader asks ``lag_source`` for lags."""

    class PerConsumerLagAwarePartitionAssignor(LagAwarePartitionAssignor):
        """"sampan-lag-aware" with its own lag source (see `LagAwarePartitionAssignor`)."""

    # staticmethod: a plain function stored on a class would otherwise bind as a method.
    PerConsumerLagAwarePartitionAssignor.lag_source = (
        staticmethod(lag_source) if lag_source is not None else None
    )
    return PerConsumerLagAwarePartitionAssignor
