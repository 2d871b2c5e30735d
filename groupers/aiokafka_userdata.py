"""The ``user_data`` the aiokafka strategies of `groupers.aiokafka` exchange: versioned JSON.

Kafka's consumer protocol gives each strategy an opaque ``user_data`` in a member's
JoinGroup metadata and in each member's SyncGroup assignment. Ours is compact UTF-8 JSON
with a ``"v"`` version field (see `docs/groupers/aiokafka.md` for the table):

* sticky metadata: ``{"v":1,"generation":3,"owned":{"clicks":[0,2]}}``
* sticky assignment: ``{"v":1,"generation":4}``
* stream-join metadata: ``{"v":1,"epoch":3,"owned":[0,2]}``
* stream-join assignment: ``{"v":1,"epoch":4,"numbers":[0,2]}``

Decoding never raises: bytes that are empty, not JSON, of an unknown shape or with an
invalid value decode as "no previous ownership" (generation/epoch -1), since a member's
bad metadata must cost stickiness, never the group's rebalance. A later version may only
add fields, so any ``v >= 1`` is read by its version-1 fields.

>>> from groupers.model import TopicPartition as TP
>>> data = encode_sticky_metadata([TP("clicks", 2), TP("clicks", 0)], 3)
>>> data
b'{"v":1,"generation":3,"owned":{"clicks":[0,2]}}'
>>> owned = decode_sticky_metadata(data)
>>> sorted(map(str, owned.partitions)), owned.generation
(['clicks-0', 'clicks-2'], 3)
>>> decode_sticky_metadata(b"garbage")
OwnedPartitions(partitions=frozenset(), generation=-1)
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, NamedTuple

from groupers.model import TopicPartition

__all__ = [
    "VERSION",
    "OwnedNumbers",
    "OwnedPartitions",
    "decode_join_assignment",
    "decode_join_metadata",
    "decode_sticky_assignment",
    "decode_sticky_metadata",
    "encode_join_assignment",
    "encode_join_metadata",
    "encode_sticky_assignment",
    "encode_sticky_metadata",
]

VERSION = 1
"""The version this module writes; it reads any version >= 1 by the version-1 fields."""

UNKNOWN = -1
"""Generation/epoch of "no previous assignment", as the assignors expect it."""


class OwnedPartitions(NamedTuple):
    """What a sticky member reports it owned, and the generation of that assignment."""

    partitions: frozenset[TopicPartition]
    generation: int


class OwnedNumbers(NamedTuple):
    """What a stream-join member reports it owned (partition numbers), and the epoch."""

    numbers: frozenset[int]
    epoch: int


NO_PARTITIONS = OwnedPartitions(frozenset(), UNKNOWN)
NO_NUMBERS = OwnedNumbers(frozenset(), UNKNOWN)


def encode_sticky_metadata(owned: Iterable[TopicPartition], generation: int) -> bytes:
    """JoinGroup user_data of a sticky member: its partitions by topic, and generation."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(set(owned)):
        by_topic.setdefault(topic, []).append(partition)
    return _dump({"v": VERSION, "generation": generation, "owned": by_topic})


def decode_sticky_metadata(data: bytes) -> OwnedPartitions:
    """Inverse of `encode_sticky_metadata`; anything invalid → `NO_PARTITIONS`."""
    document = _load(data)
    if document is None:
        return NO_PARTITIONS
    generation = _count(document.get("generation"), allow_unknown=True)
    owned = document.get("owned")
    if generation is None or not isinstance(owned, dict):
        return NO_PARTITIONS
    partitions: set[TopicPartition] = set()
    for topic, numbers in owned.items():
        if not isinstance(numbers, list) or any(_count(n) is None for n in numbers):
            return NO_PARTITIONS
        partitions.update(TopicPartition(topic, n) for n in numbers)
    return OwnedPartitions(frozenset(partitions), generation)


def encode_sticky_assignment(generation: int) -> bytes:
    """SyncGroup user_data the sticky leader sends every member: the new generation."""
    return _dump({"v": VERSION, "generation": generation})


def decode_sticky_assignment(data: bytes) -> int:
    """The generation in a sticky assignment; anything invalid → -1."""
    document = _load(data)
    generation = None if document is None else _count(document.get("generation"), True)
    return UNKNOWN if generation is None else generation


def encode_join_metadata(owned: Iterable[int], epoch: int) -> bytes:
    """JoinGroup user_data of a stream-join member: its partition numbers and epoch."""
    return _dump({"v": VERSION, "epoch": epoch, "owned": sorted(set(owned))})


def decode_join_metadata(data: bytes) -> OwnedNumbers:
    """Inverse of `encode_join_metadata`; anything invalid → `NO_NUMBERS`."""
    document = _load(data)
    if document is None:
        return NO_NUMBERS
    return _numbers_and_epoch(document, "owned")


def encode_join_assignment(numbers: Iterable[int], epoch: int) -> bytes:
    """SyncGroup user_data of a stream-join member: its partition numbers and epoch."""
    return _dump({"v": VERSION, "epoch": epoch, "numbers": sorted(set(numbers))})


def decode_join_assignment(data: bytes) -> OwnedNumbers:
    """Inverse of `encode_join_assignment`; anything invalid → `NO_NUMBERS`."""
    document = _load(data)
    if document is None:
        return NO_NUMBERS
    return _numbers_and_epoch(document, "numbers")


def _numbers_and_epoch(document: dict[str, Any], field: str) -> OwnedNumbers:
    epoch = _count(document.get("epoch"), allow_unknown=True)
    numbers = document.get(field)
    if epoch is None or not isinstance(numbers, list) or any(_count(n) is None for n in numbers):
        return NO_NUMBERS
    return OwnedNumbers(frozenset(numbers), epoch)


def _dump(document: dict[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


def _load(data: bytes) -> dict[str, Any] | None:
    """The JSON object in ``data`` if it is one of a version we read, else None."""
    if not isinstance(data, bytes | bytearray | memoryview):
        return None
    try:
        document = json.loads(bytes(data).decode("utf-8"))
    except (TypeError, ValueError, RecursionError):
        return None
    if not isinstance(document, dict):
        return None
    version = _count(document.get("v"))
    return document if version is not None and version >= VERSION else None


def _count(value: object, allow_unknown: bool = False) -> int | None:
    """``value`` if it is a non-negative int (not a bool) or, with ``allow_unknown``, -1."""
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    return value if value >= (UNKNOWN if allow_unknown else 0) else None
