"""The byte-level storage engine protocol under every task store, and its value types.

An engine stores sorted ``bytes → bytes`` and, atomically with the data, the changelog
position the data reflects. Everything above it (serdes, write buffer, restore) is
engine-independent, so `rocksdb.py` and `memory.py` only implement this protocol.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import NamedTuple, Protocol, runtime_checkable

from framework.api import KeyValueStore

__all__ = [
    "BufferedStore",
    "BulkLoadable",
    "ChangelogPosition",
    "PairWriter",
    "StoreEngine",
    "prefix_end",
]


class ChangelogPosition(NamedTuple):
    """Where a store's state came from: a changelog partition and the next offset it reflects.

    ``offset`` follows the position convention of `framework.systems.base`: the offset of
    the next changelog record *not yet* in the store.
    """

    stream: str
    partition: int
    offset: int


@runtime_checkable
class StoreEngine(Protocol):
    """Sorted ``bytes → bytes`` storage of one (store, task), plus its changelog position."""

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key``, or None."""
        ...

    def iterate(
        self, start: bytes | None = None, end: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Entries with ``start <= key < end`` sorted by key bytes; None means unbounded."""
        ...

    def write_batch(
        self, items: Mapping[bytes, bytes | None], changelog: ChangelogPosition | None
    ) -> None:
        """Write ``items`` (None deletes) and, if given, the new changelog position atomically.

        After a crash, a reopened engine shows the whole batch with its position, or
        neither.
        """
        ...

    def changelog_position(self) -> ChangelogPosition | None:
        """The position last written with `write_batch`, or None for a fresh/wiped store."""
        ...

    def wipe(self) -> None:
        """Delete every entry and the changelog position (before a full restore)."""
        ...

    def count(self) -> int:
        """The exact number of entries (scans; meant for tests, drills and tooling)."""
        ...

    def close(self) -> None:
        """Release the engine (files, locks); idempotent."""
        ...


@runtime_checkable
class BulkLoadable(Protocol):
    """An engine with a faster write mode for large restores (RocksDB: no WAL, no
    compactions until the end)."""

    def bulk_load(self) -> AbstractContextManager[None]:
        """Write in bulk mode inside the ``with`` block; normal mode again after it."""
        ...


@runtime_checkable
class PairWriter(Protocol):
    """An engine that applies parallel key and value lists in order (the later of two
    writes of one key wins), so a restore needs no dict per batch."""

    def write_pairs(
        self, keys: Sequence[bytes], values: Sequence[bytes | None],
        changelog: ChangelogPosition | None,
    ) -> None:
        """Write ``keys[i] -> values[i]`` in order (None deletes) with ``changelog``,
        atomically, as `StoreEngine.write_batch` does."""
        ...


class BufferedStore(KeyValueStore, Protocol):
    """What a worker needs of a task's store (`framework.stores.TaskStore`): the task's
    `framework.api.KeyValueStore` plus the write buffer's commit interplay."""

    name: str

    @property
    def buffered(self) -> int:
        """How many keys the write buffer holds."""
        ...

    @property
    def is_full(self) -> bool:
        """The write buffer reached its bound: the worker commits now."""
        ...

    def drain(self) -> dict[bytes, bytes | None]:
        """Hand the unapplied writes to a commit (reads still see them)."""
        ...

    def apply(self, items: Mapping[bytes, bytes | None],
              changelog: ChangelogPosition | None) -> None:
        """Write what `drain` returned to the engine, after its commit succeeded."""
        ...

    def discard(self) -> None:
        """Drop every unapplied write (the commit failed)."""
        ...

    def close(self) -> None:
        """Close the engine; unapplied writes are dropped."""
        ...


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix``; None if unbounded.

        >>> prefix_end(b"ab")
        b'ac'
        >>> prefix_end(b"a\\xff\\xff")
        b'b'
        >>> prefix_end(b"\\xff") is None
        True
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes((stripped[-1] + 1,))
