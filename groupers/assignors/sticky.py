"""Sticky partition assignor: Kafka KIP-54, *fair yet sticky* (seed 002_31535f4c5a398868).

Partitions of the subscribed topics go to group members so that the assignment is as
balanced as possible (sizes differ by at most one, or no single move lowers the
document's balance score) and, within that, as many partitions as possible stay with the
member that owned them. Two paths:

* **equal subscriptions** (every member subscribes to the same topics): each member keeps
  up to its quota (``total // members``, with exactly ``total % members`` members allowed
  one more) of what it owned; the rest go round-robin to members below quota. Linear
  time, for groups of thousands of members and a million partitions.
* **general** (`groupers.assignors.sticky_general`): the document's algorithm.

Where this deviates from the document and from Kafka, and why:

* Conflicting claims are settled per partition, as Kafka does: the highest ``generation``
  wins (a member that missed a rebalance cannot keep what it lost), and a tie at the
  highest generation leaves the partition unowned, to be assigned afresh.
* A subscription to a topic missing from ``partitions_per_topic`` is an error, not a log
  line: the caller must say how many partitions the topic has (0 if it does not exist).
* Owned partitions of topics the member no longer subscribes to, of deleted topics, or
  beyond the topic's partition count are dropped silently: that is a normal rebalance.
* Instead of Kafka's partition-movement bookkeeping, A → B → A cycles are removed after
  balancing (see `sticky_general`); the equal path cannot create them.

    >>> import groupers as G
    >>> first = G.StickyAssignor().assign({"t0": 2, "t1": 2}, {
    ...     "C0": G.Subscription(["t0", "t1"]), "C1": G.Subscription(["t0", "t1"])})
    >>> [str(tp) for tp in first["C0"]], [str(tp) for tp in first["C1"]]
    (['t0-0', 't1-0'], ['t0-1', 't1-1'])
    >>> after = G.StickyAssignor().assign({"t0": 2, "t1": 2}, {
    ...     "C0": G.Subscription(["t0", "t1"], first["C0"], generation=1),
    ...     "C1": G.Subscription(["t0", "t1"], first["C1"], generation=1),
    ...     "C2": G.Subscription(["t0", "t1"])})
    >>> {member: [str(tp) for tp in tps] for member, tps in after.items()}
    {'C0': ['t0-0', 't1-0'], 'C1': ['t0-1'], 'C2': ['t1-1']}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import accumulate, compress, repeat

from groupers.assignors.sticky_general import assign_general
from groupers.errors import AssignmentError
from groupers.model import Subscription, TopicPartition

__all__ = ["StickyAssignor"]

_CONTESTED = -2
"""Holder mark for a partition claimed by several members at the same highest generation."""


class StickyAssignor:
    """Kafka's sticky assignor (KIP-54): balanced first, then as sticky as possible.

    Stateless: what each member owned comes in with its `Subscription`.
    """

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
    ) -> dict[str, list[TopicPartition]]:
        """Member → its partitions sorted by (topic, partition); every member is a key.

        Raises `AssignmentError` for a negative or non-integer partition count and for a
        subscription to a topic missing from ``partitions_per_topic``.
        """
        _check_counts(partitions_per_topic)
        members = sorted(subscriptions)
        for member in members:
            _check_subscription(member, subscriptions[member].topics, partitions_per_topic)
        topics = sorted({t for s in subscriptions.values() for t in s.topics})
        counts = [partitions_per_topic[t] for t in topics]
        topic_index = {t: i for i, t in enumerate(topics)}
        member_topics = [
            sorted(topic_index[t] for t in subscriptions[m].topics) for m in members
        ]
        owned = _resolve_owned([subscriptions[m] for m in members], member_topics, topics, counts)

        if members and all(mt == member_topics[0] for mt in member_topics):
            assigned = _assign_equal(sum(counts), owned)
        else:
            assigned = assign_general(counts, member_topics, owned)
        return _as_topic_partitions(members, assigned, topics, counts)


def _check_counts(partitions_per_topic: Mapping[str, int]) -> None:
    """Refuse partition counts that cannot describe a topic."""
    for topic in sorted(partitions_per_topic):
        count = partitions_per_topic[topic]
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise AssignmentError(
                f"partitions_per_topic[{topic!r}] is {count!r}: a partition count must be "
                "an integer >= 0 (use 0 for a topic that does not exist yet)"
            )


def _check_subscription(
    member: str, topics: frozenset[str], partitions_per_topic: Mapping[str, int]
) -> None:
    """Refuse a subscription to a topic whose partition count the caller did not give."""
    missing = sorted(t for t in topics if t not in partitions_per_topic)
    if missing:
        raise AssignmentError(
            f"member {member!r} subscribes to topic {missing[0]!r}, which is missing from "
            "partitions_per_topic: add its partition count (0 if it does not exist yet) "
            "or remove it from the subscription"
        )


def _resolve_owned(
    subscriptions: Sequence[Subscription],
    member_topics: Sequence[Sequence[int]],
    topics: Sequence[str],
    counts: Sequence[int],
) -> list[list[int]]:
    """Per member, the sorted partition indexes it may keep.

    A partition is indexed ``base[topic] + partition`` over ``topics`` in sorted order.
    Claims outside the member's subscription or the topic's range are dropped; among
    several claims the highest generation wins and a tie at the top leaves it unowned.
    """
    bases = [0, *accumulate(counts)]
    holder = [-1] * bases[-1]
    held_generation = [0] * bases[-1]
    for m, subscription in enumerate(subscriptions):
        generation = subscription.generation
        ranges = {topics[t]: (bases[t], counts[t]) for t in member_topics[m]}
        for topic, partition in subscription.owned:
            span = ranges.get(topic)
            if span is None or not 0 <= partition < span[1]:
                continue
            g = span[0] + partition
            current = holder[g]
            if current == -1 or generation > held_generation[g]:
                holder[g] = m
                held_generation[g] = generation
            elif generation == held_generation[g]:
                holder[g] = _CONTESTED
    owned: list[list[int]] = [[] for _ in subscriptions]
    for g, m in enumerate(holder):
        if m >= 0:
            owned[m].append(g)
    return owned


def _assign_equal(total: int, owned: Sequence[Sequence[int]]) -> list[list[int]]:
    """Equal subscriptions: keep owned partitions up to quota, deal the rest round-robin.

    Members that lose partitions never gain any, so no partition can move A → B while
    another moves B → A.
    """
    low, extra = divmod(total, len(owned))
    quota = [low] * len(owned)
    # A member owning more than ``low`` keeps one more partition with an extra slot, so
    # handing the slots out in member order keeps as much as any other choice.
    for m, mine in enumerate(owned):
        if extra and len(mine) > low:
            quota[m] += 1
            extra -= 1
    kept = [list(mine[: quota[m]]) for m, mine in enumerate(owned)]
    for m in range(len(owned)):
        if extra and quota[m] == low:
            quota[m] += 1
            extra -= 1
    free = bytearray(b"\x01") * total
    for mine in kept:
        for g in mine:
            free[g] = 0
    unassigned = list(compress(range(total), free))
    need = [quota[m] - len(mine) for m, mine in enumerate(kept)]
    _deal_round_robin(unassigned, need, kept)
    return kept


def _deal_round_robin(
    unassigned: Sequence[int], need: Sequence[int], assigned: list[list[int]]
) -> None:
    """Deal ``unassigned`` one per member per round, skipping members whose need is met.

    Rounds in which the same members take part are dealt as one block by slicing, so the
    cost is per distinct need, not per partition.
    """
    active = [m for m, n in enumerate(need) if n > 0]
    start = rounds_done = 0
    for level in sorted({need[m] for m in active}):
        width = len(active)
        end = start + (level - rounds_done) * width
        block = unassigned[start:end]
        for j, m in enumerate(active):
            assigned[m].extend(block[j::width])
        start, rounds_done = end, level
        active = [m for m in active if need[m] > level]


def _as_topic_partitions(
    members: Sequence[str],
    assigned: Sequence[Sequence[int]],
    topics: Sequence[str],
    counts: Sequence[int],
) -> dict[str, list[TopicPartition]]:
    """Turn partition indexes back into sorted `TopicPartition` lists, members sorted."""
    table: list[TopicPartition] = []
    for topic, count in zip(topics, counts, strict=True):
        table.extend(map(TopicPartition, repeat(topic, count), range(count)))
    return {
        member: [table[g] for g in sorted(assigned[m])] for m, member in enumerate(members)
    }
