"""Kafka's default partitioner, so a key lands in the same partition on every system.

`murmur2` is Kafka's Java ``Utils.murmur2`` (seed ``0x9747b28c``, signed 32-bit result);
`partition_for_key` is ``(murmur2(key) & 0x7fffffff) % count`` — what the Java client,
aiokafka and librdkafka's ``murmur2_random`` pick for a keyed record. Records without a
key use `RoundRobin`.

>>> murmur2(b"21")
-973932308
>>> partition_for_key(b"user-1", 7)
3
"""

from __future__ import annotations

import struct

__all__ = ["RoundRobin", "murmur2", "partition_for_key"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF

_CACHE_MAX_ENTRIES = 1 << 16
_CACHE_MAX_KEY_BYTES = 128
_cache: dict[bytes, int] = {}
_words: dict[int, struct.Struct] = {}


def _murmur2_u32(data: bytes) -> int:
    """Kafka's murmur2 of ``data`` as an unsigned 32-bit int (the mixing done 4 bytes a step)."""
    length = len(data)
    h = _SEED ^ length
    quads = length >> 2
    if quads:
        words = _words.get(quads)
        if words is None:
            words = _words[quads] = struct.Struct(f"<{quads}I")
        for word in words.unpack_from(data):
            k = word * _M & _MASK
            # h*m ^ (k ^ k>>>24)*m, reduced once: the low 32 bits of a XOR only
            # depend on the low 32 bits of its operands.
            h = (h * _M ^ (k ^ k >> 24) * _M) & _MASK
    tail = length & 3
    if tail:
        end = length - tail
        if tail == 3:
            h ^= data[end + 2] << 16
        if tail >= 2:
            h ^= data[end + 1] << 8
        h = (h ^ data[end]) * _M & _MASK
    h ^= h >> 13
    h = h * _M & _MASK
    return h ^ h >> 15


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's murmur2 hash of ``data``: a signed 32-bit int, equal to Java's ``Utils.murmur2``.

    >>> murmur2(b"foobar"), murmur2(b"")
    (-790332482, 275646681)
    """
    h = _murmur2_u32(data if type(data) is bytes else bytes(data))
    return h - 0x100000000 if h & 0x80000000 else h


def partition_for_key(key: bytes | bytearray | memoryview, count: int) -> int:
    """The partition Kafka's default partitioner gives ``key`` in a stream of ``count``.

    Hashes of short keys are memoized (bounded; cleared when full): streams repeat
    keys, and a hit costs a tenth of hashing (see ``bench/partitioner.py``).

    >>> [partition_for_key(b"user-1", n) for n in (1, 2, 4, 8)]
    [0, 0, 0, 4]
    """
    if count < 1:
        raise ValueError(f"partition count must be at least 1, got {count}")
    if type(key) is not bytes:
        key = bytes(key)
    positive = _cache.get(key)
    if positive is None:
        positive = _murmur2_u32(key) & 0x7FFFFFFF
        if len(key) <= _CACHE_MAX_KEY_BYTES:
            if len(_cache) >= _CACHE_MAX_ENTRIES:
                _cache.clear()
            _cache[key] = positive
    return positive % count


class RoundRobin:
    """Partitions for records without a key: per stream, 0, 1, 2, … modulo the count.

    Deterministic — the n-th keyless record of a stream goes to ``(start + n) % count``
    — so tests and replays place records identically.

    >>> turns = RoundRobin()
    >>> [turns.next_partition("clicks", 3) for _ in range(4)], turns.next_partition("views", 3)
    ([0, 1, 2, 0], 0)
    """

    __slots__ = ("_start", "_turns")

    def __init__(self, start: int = 0) -> None:
        self._start = start
        self._turns: dict[str, int] = {}

    def next_partition(self, stream: str, count: int) -> int:
        """The partition of the next keyless record of ``stream`` (``count`` partitions)."""
        if count < 1:
            raise ValueError(f"partition count of {stream!r} must be at least 1, got {count}")
        turn = self._turns.get(stream, self._start)
        self._turns[stream] = turn + 1
        return turn % count
