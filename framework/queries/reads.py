"""Reading one task's store for a query: committed state by default.

A task's `TaskStore` keeps its writes in a buffer until the commit that makes them
durable has landed, then applies them to its engine in one batch (one RocksDB
WriteBatch; a dict update of the memory engine) with the new changelog position
(`framework.worker.commit`). The engine therefore holds exactly the state of the last
commit that landed, and a committed read reads the engine alone. Reads and the apply
both run on the worker's event loop and a read never awaits, so a read sees a commit's
apply whole or not at all — on either engine. ``consistency = "uncommitted"`` reads
through the buffer, as the task itself does: values a crash may roll back.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any, Literal

from framework.queries.errors import QueryError
from framework.stores.base import prefix_end
from framework.stores.buffer import TaskStore

__all__ = ["CONSISTENCIES", "Consistency", "Found", "Scan", "position_of", "read_key",
           "scan"]

Consistency = Literal["committed", "uncommitted"]
CONSISTENCIES: tuple[Consistency, ...] = ("committed", "uncommitted")


@dataclass(frozen=True)
class Found:
    """One key's answer from one task."""

    found: bool
    value: Any
    position: int | None
    """The changelog offset the task's committed state reflects (None: no changelog)."""


@dataclass(frozen=True)
class Scan:
    """Bounds of a range or prefix scan, in serialized-key order."""

    start: bytes | None
    end: bytes | None
    after: bytes | None
    """The continuation: only keys after this serialized key."""
    limit: int

    @classmethod
    def of_prefix(cls, prefix: bytes, after: bytes | None, limit: int) -> Scan:
        return cls(prefix, prefix_end(prefix), after, limit)

    def lower(self) -> bytes | None:
        """The first serialized key the scan may return."""
        if self.after is None:
            return self.start
        following = self.after + b"\x00"  # the smallest key after `after`
        return following if self.start is None or following > self.start else self.start


def position_of(store: TaskStore) -> int | None:
    """The changelog offset ``store``'s engine reflects (its last applied commit)."""
    position = store.engine.changelog_position()
    return None if position is None else position.offset


def read_key(store: TaskStore, key: Any, consistency: Consistency) -> Found:
    """``key``'s value in ``store`` (see the module for what ``consistency`` reads)."""
    position = position_of(store)
    if consistency == "uncommitted":
        missing = object()
        value = store.get(key, missing)
        return Found(value is not missing, None if value is missing else value, position)
    raw = _key_bytes(store, key)
    data = store.engine.get(raw)
    if data is None:
        return Found(False, None, position)
    return Found(True, _value(store, raw, data), position)


def scan(store: TaskStore, bounds: Scan, consistency: Consistency
         ) -> tuple[list[tuple[bytes, Any, Any]], int | None]:
    """Up to ``bounds.limit`` entries of ``store`` in bounds: (serialized key, key, value),
    in serialized-key order, and the store's position."""
    position = position_of(store)
    lower, end = bounds.lower(), bounds.end
    if lower is not None and end is not None and lower >= end:
        return [], position
    if consistency == "uncommitted":
        decoded = store._entries(lower, end)  # noqa: SLF001 - the task's own merged view
        return [(_key_bytes(store, key), key, value)
                for key, value in islice(decoded, bounds.limit)], position
    entries: Iterator[tuple[bytes, bytes]] = store.engine.iterate(lower, end)
    found = [(raw, _decode_key(store, raw), _value(store, raw, data))
             for raw, data in islice(entries, bounds.limit)]
    return found, position


def encode_key(store: TaskStore, key: Any) -> bytes:
    """``key`` serialized by ``store``'s key serde (a `QueryError` naming the store)."""
    return _key_bytes(store, key)


def _key_bytes(store: TaskStore, key: Any) -> bytes:
    try:
        return store._encode_key(key)  # noqa: SLF001 - the store's own key encoding
    except Exception as error:
        raise QueryError(f"store {store.name!r}: {error}") from error


def _decode_key(store: TaskStore, raw: bytes) -> Any:
    return store._decode_key(raw)  # noqa: SLF001


def _value(store: TaskStore, raw: bytes, data: bytes) -> Any:
    return store._decode_value(raw, data)  # noqa: SLF001
