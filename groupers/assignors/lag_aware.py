"""Lag-aware assignor: KAFKA-5337 (seed 003_56cb1a1e9d4677ef).

Balances partition *count* first and, within that, the total lag each member takes on.
Topics are assigned one at a time (sorted by name). Within a topic, partitions go out in
order of decreasing lag (ties: lower partition number first), each to the subscribed
member with the fewest partitions of this topic so far, then the least lag of this topic
so far, then the smallest member id.

Choices and deviations, and why:

* Counters are **per topic**, as the document says (``consumerTotalPartitions`` and
  ``consumerTotalLags`` are "maintained during assignment of each topic"). Counts are
  therefore balanced within each topic, not across topics: as with Kafka's RangeAssignor,
  which the document names as the zero-lag behaviour, the members with the smallest ids
  can end up with one extra partition of every topic.
* The document's final rule ("if all consumers have an equal number of partitions, take
  the one with the least lag") is applied among the members tied on the smallest count,
  which is the same thing while counts stay balanced; member id breaks the last tie.
* Greedy, not optimal: the result is not the best lag balance among count-balanced
  assignments (that is a partitioning problem); see `docs/groupers/lag_aware.md`.
* Not sticky: previously owned partitions and generations in a `Subscription` are ignored,
  as in the document. Lags of partitions outside ``partitions_per_topic`` are ignored; a
  partition with no lag given has lag 0.
* `partition_lag` follows the document's rule; a committed offset past the end gives 0.

    >>> import groupers as G
    >>> lags = {G.TopicPartition("t0", 0): 100_000, G.TopicPartition("t0", 1): 60_000,
    ...         G.TopicPartition("t0", 2): 50_000}
    >>> result = G.LagAwareAssignor().assign({"t0": 3}, {"C0": ["t0"], "C1": ["t0"]}, lags)
    >>> {member: [str(tp) for tp in tps] for member, tps in result.items()}
    {'C0': ['t0-0'], 'C1': ['t0-1', 't0-2']}
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Mapping

from groupers.errors import AssignmentError
from groupers.model import Subscription, TopicPartition

__all__ = ["LagAwareAssignor", "partition_lag"]


def partition_lag(
    begin: int, end: int, committed: int | None, auto_offset_reset: str = "latest"
) -> int:
    """A partition's lag for the group, from its offsets (document's step 1).

    ``committed`` present: ``end - committed`` (never negative). Absent: 0 when
    ``auto_offset_reset`` is ``latest``, otherwise every available record
    (``end - begin``), since the group would start from the beginning.

        >>> partition_lag(0, 500, 120), partition_lag(100, 500, None)
        (380, 0)
        >>> partition_lag(100, 500, None, "earliest")
        400
    """
    if begin < 0 or end < begin:
        raise AssignmentError(
            f"offsets begin={begin}, end={end} are inconsistent; "
            "need 0 <= begin <= end (the partition's earliest and next offsets)"
        )
    if committed is not None:
        if committed < 0:
            raise AssignmentError(
                f"committed offset {committed} is negative; pass None when nothing is committed"
            )
        return max(0, end - committed)
    if auto_offset_reset.strip().lower() == "latest":
        return 0
    return end - begin


class LagAwareAssignor:
    """KAFKA-5337: count-balanced per topic, then total lag as even as the greedy order allows.

    Stateless and not sticky: each call assigns from the lags alone.
    """

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription | Collection[str]],
        lags: Mapping[TopicPartition, int],
    ) -> dict[str, list[TopicPartition]]:
        """Member → its topic partitions, sorted; every member appears."""
        topics_of = {member: _topics(member, subscriptions[member])
                     for member in sorted(subscriptions)}
        _check_counts(partitions_per_topic, topics_of)
        _check_lags(lags)
        assignment: dict[str, list[TopicPartition]] = {member: [] for member in topics_of}
        for topic in sorted({t for topics in topics_of.values() for t in topics}):
            subscribers = [member for member, topics in topics_of.items() if topic in topics]
            for member, tp in assign_topic(topic, partitions_per_topic[topic], subscribers, lags):
                assignment[member].append(tp)
        return {member: sorted(tps) for member, tps in assignment.items()}


def assign_topic(
    topic: str, count: int, subscribers: list[str], lags: Mapping[TopicPartition, int]
) -> list[tuple[str, TopicPartition]]:
    """Document's step 2 for one topic: (member, partition) pairs in the order given out."""
    partitions = sorted(
        (TopicPartition(topic, p) for p in range(count)),
        key=lambda tp: (-lags.get(tp, 0), tp.partition),
    )
    # (partitions of this topic so far, lag of this topic so far, member): the heap's
    # smallest entry is exactly the document's choice, with member id as the last tie.
    members = [(0, 0, member) for member in sorted(subscribers)]
    heapq.heapify(members)
    given: list[tuple[str, TopicPartition]] = []
    for tp in partitions:
        taken, total_lag, member = heapq.heappop(members)
        given.append((member, tp))
        heapq.heappush(members, (taken + 1, total_lag + lags.get(tp, 0), member))
    return given


def _topics(member: str, subscription: Subscription | Collection[str]) -> frozenset[str]:
    """The topics a subscription names, whether a `Subscription` or a plain collection."""
    if isinstance(subscription, Subscription):
        return subscription.topics
    if isinstance(subscription, str):
        raise AssignmentError(
            f"member {member!r} is subscribed with the string {subscription!r}; "
            "pass a collection of topic names, e.g. [" + repr(subscription) + "]"
        )
    return frozenset(subscription)


def _check_counts(
    partitions_per_topic: Mapping[str, int], topics_of: Mapping[str, frozenset[str]]
) -> None:
    for topic in sorted(partitions_per_topic):
        if partitions_per_topic[topic] < 0:
            raise AssignmentError(
                f"topic {topic!r} has a negative partition count "
                f"({partitions_per_topic[topic]}); pass 0 for a topic that does not exist"
            )
    for member, topics in topics_of.items():
        for topic in sorted(topics):
            if topic not in partitions_per_topic:
                raise AssignmentError(
                    f"member {member!r} subscribes to topic {topic!r}, which is missing from "
                    "partitions_per_topic; pass its partition count (0 if it does not exist)"
                )


def _check_lags(lags: Mapping[TopicPartition, int]) -> None:
    for tp in sorted(lags):
        if lags[tp] < 0:
            raise AssignmentError(
                f"partition {TopicPartition(*tp)} has a negative lag ({lags[tp]}); "
                "lags are end offset minus committed offset, at least 0 (see partition_lag)"
            )
