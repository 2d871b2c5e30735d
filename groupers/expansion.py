"""Partition expansion algorithms (Samza SEP-5): map a partition back to where its keys began.

A producer using ``hash(key) % count`` and a stream grown from ``n`` to ``k·n``
partitions means every key now in partition ``p`` was in ``p % n`` before any
expansion. The fixed-task groupers use this to keep a key on its task.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from groupers.errors import ExpansionError

__all__ = ["DefaultPartitionExpansionAlgorithm", "PartitionExpansionAlgorithm"]


@runtime_checkable
class PartitionExpansionAlgorithm(Protocol):
    """Where the keys of a partition lived before the stream ever expanded.

    Implementations must return ``partition`` itself when ``partition < initial_count``
    and raise `ExpansionError` for counts they cannot map.
    """

    def partition_before_expansion(
        self, partition: int, current_count: int, initial_count: int
    ) -> int:
        """Index, among the ``initial_count`` original partitions, holding ``partition``'s keys."""
        ...


class DefaultPartitionExpansionAlgorithm:
    """``partition % initial_count``: right for Kafka's default partitioner and k·n growth.

        >>> DefaultPartitionExpansionAlgorithm().partition_before_expansion(5, 8, 2)
        1
    """

    def partition_before_expansion(
        self, partition: int, current_count: int, initial_count: int
    ) -> int:
        """Return ``partition % initial_count`` after checking the counts allow it."""
        if initial_count < 1:
            raise ExpansionError(
                f"initial partition count must be at least 1, got {initial_count}"
            )
        if current_count < initial_count:
            raise ExpansionError(
                f"partition count decreased from {initial_count} to {current_count}: keys "
                f"of the lost partitions would be dropped; partition counts may only grow, "
                f"to a multiple of {initial_count} — restore at least {initial_count} partitions"
            )
        if current_count % initial_count:
            raise ExpansionError(
                f"partition count {current_count} is not a multiple of {initial_count}: keys "
                f"would change tasks; expand to a multiple of {initial_count} "
                f"(e.g. {_next_multiple(current_count, initial_count)}), or re-key the "
                f"job's state offline to a task count that divides {current_count}"
            )
        if not 0 <= partition < current_count:
            raise ExpansionError(f"partition {partition} is outside 0..{current_count - 1}")
        return partition % initial_count

    def __repr__(self) -> str:
        return "DefaultPartitionExpansionAlgorithm()"


def _next_multiple(value: int, base: int) -> int:
    """Smallest multiple of ``base`` that is at least ``value``."""
    return -(-value // base) * base
