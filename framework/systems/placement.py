"""Which partition a produced record goes to — the same rule in every system.

An explicit partition is kept; a key goes where Kafka's default partitioner puts it
(``murmur2(key) & 0x7fffffff % count``), so data lands identically on the local log
and on Kafka; records without a key go round robin per stream.

>>> placement = Placement("local")
>>> placement.partition(ProducerRecord("clicks", b"user-1", b"v"), 7)
3
>>> placement.partition(ProducerRecord("clicks", None, b"v", partition=5), 7)
5
>>> memo = {}
>>> placement.row_partition(("clicks", b"user-1", b"v", None, None, ()), 7, memo), memo
(3, {b'user-1': 3})
>>> Placement.group(OutputColumns("clicks", [b"user-1", b"user-2"], [b"a", None]), 4)
[[b'user-1', b'a', b'user-2', None], [], [], []]
"""

from __future__ import annotations

import random

from framework.errors import StreamNotFoundError
from framework.partitioner import RoundRobin, partition_for_key
from framework.systems.base import OutputColumns, ProducerRecord, ProducerRow
from framework.wording import counted

__all__ = ["Placement"]


class Placement:
    """Partition choice for one system; keeps the round-robin turn of each stream."""

    def __init__(self, system: str) -> None:
        self.system = system
        # A random start so that short-lived producers (one record each) do not all
        # write their keyless records to partition 0.
        self._round_robin = RoundRobin(start=random.randrange(1 << 16))

    def partition(self, record: ProducerRecord, count: int) -> int:
        """The partition of ``record`` in a stream of ``count`` partitions."""
        if not isinstance(record.key, bytes | None) or not isinstance(record.value, bytes | None):
            raise TypeError(
                f"record for stream {record.stream!r}: key and value must be bytes or None "
                f"(got {type(record.key).__name__}, {type(record.value).__name__}); "
                "serialize them first"
            )
        if record.partition is not None:
            if not 0 <= record.partition < count:
                raise StreamNotFoundError(
                    f"partition {record.partition} of stream {record.stream!r} does not exist "
                    f"in system {self.system!r} (it has {counted(count, 'partition')})"
                )
            return record.partition
        if record.key is not None:
            return partition_for_key(record.key, count)
        return self._round_robin.next_partition(record.stream, count)

    def row_partition(self, row: ProducerRow, count: int, memo: dict[bytes, int]) -> int:
        """The partition of ``row`` (a `ProducerRow`) in a stream of ``count``: the hot
        path of a write (bytes key and value: ``memo`` keeps each key's murmur2 for the
        write's stream), else `partition` — an explicit partition checked, round robin
        without a key, or the error naming the stream."""
        key, value, partition = row[1], row[2], row[3]
        if type(key) is bytes and (value is None or type(value) is bytes):
            if partition is None:
                found = memo.get(key)
                if found is None:
                    found = memo[key] = partition_for_key(key, count)
                return found
            if 0 <= partition < count:
                return partition
        return self.partition(ProducerRecord(*row), count)

    @staticmethod
    def group(columns: OutputColumns, count: int) -> list[list[bytes | None]]:
        """``columns`` split by partition in a stream of ``count`` (each key's hash):
        per partition its keys and values interleaved, ``[key, value, key, value, ...]``,
        in the order sent — one Python step per record, no tuple or object per record."""
        buckets: list[list[bytes | None]] = [[] for _ in range(count)]
        adds = [bucket.append for bucket in buckets]
        memo: dict[bytes, int] = {}
        known = memo.get
        for key, value in zip(columns.keys, columns.values, strict=True):
            partition = known(key)
            if partition is None:
                partition = memo[key] = partition_for_key(key, count)
            add = adds[partition]
            add(key)
            add(value)
        return buckets
