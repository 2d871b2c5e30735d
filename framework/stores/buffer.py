"""The store a task sees: serdes over a write buffer over a byte-level engine.

Writes stay in memory (latest value per serialized key; a delete is a tombstone) until
the worker commits; reads see them first. That buffer is the exactly-once mechanism —
nothing reaches the engine before the commit that makes it durable in the changelog
succeeded — and the main speed lever: repeated writes to a key cost one changelog
record and one RocksDB write per commit. An int or an ASCII string written with the JSON
value serde (a counter, a sum, `framework.windows`' state text) is kept as it is and
encoded when the commit drains the buffer: it cannot fail to encode, and a key written
many times between commits is encoded once.

A layer above may keep its own latest writes in memory and register a flush
(`before_drain`) that puts them when the store is drained or read by range.

Commit interplay (DESIGN.md §6 "Commit protocol"; docs/stores.md#write-buffer-and-the-commit)::

    items = store.drain()          # flushes, then buffer → pending; reads see pending
    ... produce items as changelog records, write the checkpoint ...
    store.apply(items, position)   # one engine batch with the new changelog position
    # or, if the commit failed:
    store.discard()                # drop every unapplied write
"""

from __future__ import annotations

import logging
import reprlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from framework.config.serdes import JsonSerde, StringSerde
from framework.errors import SerdeError, StoreError
from framework.stores.base import ChangelogPosition, StoreEngine, prefix_end

__all__ = ["Serde", "TaskStore"]

log = logging.getLogger(__name__)

_short = reprlib.Repr()
_short.maxstring = 60
_short.maxother = 60


class Serde(Protocol):
    """What a store needs of a serde (see `framework.config.serdes`)."""

    def to_bytes(self, obj: Any) -> bytes: ...

    def from_bytes(self, data: bytes) -> Any: ...


_MISSING = object()
_IMMUTABLE = frozenset({int, float, str, bool, bytes})
"""Value types a task cannot mutate behind the store's back: safe to hand out again."""
_UNENCODED = bytes(bytearray(b"<a value encoded at drain>"))
"""The buffer's value of a key whose value (an int or an ASCII str, JSON serde) is encoded
at `drain`; the value itself is in ``_objects``. Compared by identity: this object is
never a serde's output."""


class TaskStore:
    """One task's instance of one store, implementing `framework.api.KeyValueStore`.

        >>> from framework.stores.memory import MemoryEngine
        >>> class Utf8:
        ...     name = "string"
        ...     def to_bytes(self, obj): return obj.encode()
        ...     def from_bytes(self, data): return data.decode()
        >>> store = TaskStore("counts", MemoryEngine(), Utf8(), Utf8(), max_keys=100)
        >>> store.put("b", "2"); store.put("a", "1")
        >>> list(store.all())
        [('a', '1'), ('b', '2')]
        >>> store.apply(store.drain(), None)
        >>> store.engine.get(b"a")
        b'1'
    """

    def __init__(
        self,
        name: str,
        engine: StoreEngine,
        key_serde: Serde,
        value_serde: Serde,
        max_keys: int = 10_000,
        *,
        task: str | None = None,
    ) -> None:
        if max_keys < 1:
            raise StoreError(f"store {name!r}: the write buffer bound must be >= 1, "
                             f"got {max_keys}")
        self.name = name
        self.task = task
        self.engine = engine
        self.max_keys = max_keys
        self._key_serde = key_serde
        self._value_serde = value_serde
        # The string serde's to_bytes is str.encode once the type is checked; a non-str
        # makes str.encode fail and the key goes the careful way (`_encode_key`).
        self._key_to = str.encode if type(key_serde) is StringSerde else key_serde.to_bytes
        self._value_to = value_serde.to_bytes
        self._value_from = value_serde.from_bytes
        self._ints_later = type(value_serde) is JsonSerde  # see `_UNENCODED`
        self._last_key: Any = _MISSING  # the last str key encoded, and its bytes: a get
        self._last_raw = b""  # and a put of one key (read-modify-write) encode it once
        self._buffer: dict[bytes, bytes | None] = {}
        # Immutable values put since the last drain, so a get of a just-written key (the
        # common read-modify-write of counters) skips decoding; in step with `_buffer`.
        self._objects: dict[bytes, Any] = {}
        self._pending: dict[bytes, bytes | None] | None = None  # drained, not yet applied
        self.journal: list[tuple[TaskStore, bytes, Any, Any]] | None = None
        """Set by a worker that may undo one record's writes (`undo`); None: no journal."""
        self._flushes: dict[str, Callable[[], None]] = {}

    # -- the task's API ---------------------------------------------------------------

    def get(self, key: Any, default: Any = None) -> Any:
        """The value of ``key`` (buffered writes first), or ``default`` when it has none."""
        if key is self._last_key:
            raw = self._last_raw
        else:
            try:  # `_fast_key` inline: this is the task's hottest call
                raw = self._key_to(key)
            except Exception:
                raw = self._encode_key(key)  # raises the SerdeError naming the store
            if type(raw) is not bytes or key is None:
                raw = self._encode_key(key)
            if type(key) is str:
                self._last_key, self._last_raw = key, raw
        cached = self._objects.get(raw, _MISSING)
        if cached is not _MISSING:
            return cached  # an immutable value put since the last drain (never None)
        buffer = self._buffer
        if raw in buffer:
            data = buffer[raw]
        elif self._pending is not None and raw in self._pending:
            data = self._pending[raw]
        else:
            data = self.engine.get(raw)
        if data is None:
            return default
        try:
            return self._value_from(data)
        except Exception:
            return self._decode_value(raw, data)  # raises the SerdeError naming the store

    def __contains__(self, key: Any) -> bool:
        """``key in store``: whether ``key`` has a value (buffered writes first)."""
        return self.get(key, _MISSING) is not _MISSING

    def put(self, key: Any, value: Any) -> None:
        """Set ``key`` to ``value`` in the write buffer; None deletes."""
        if key is self._last_key:
            raw = self._last_raw
        else:
            try:  # `_fast_key` inline
                raw = self._key_to(key)
            except Exception:
                raw = self._encode_key(key)  # raises the SerdeError naming the store
            if type(raw) is not bytes or key is None:
                raw = self._encode_key(key)
        if self.journal is not None:
            self._remember(raw)
        if value is None:
            self._buffer[raw] = None
            self._objects.pop(raw, None)
            return
        if self._ints_later and (type(value) is int
                                 or (type(value) is str and value.isascii())):
            self._buffer[raw] = _UNENCODED
            self._objects[raw] = value
            return
        try:
            data = self._value_to(value)
        except Exception:
            data = None
        if type(data) is not bytes:  # a failure or a non-bytes result: the careful path
            data = self._encode_value(key, value)
        self._buffer[raw] = data
        if type(value) in _IMMUTABLE:
            self._objects[raw] = value
        else:
            self._objects.pop(raw, None)

    def _fast_key(self, key: Any) -> bytes:
        """The serialized key on the hot path; `_encode_key` for None, errors, non-bytes."""
        if key is not None:
            try:
                raw = self._key_to(key)
            except Exception:
                raw = None
            if type(raw) is bytes:
                return raw
        return self._encode_key(key)

    def delete(self, key: Any) -> None:
        """Delete ``key`` (a tombstone in the buffer, hiding any stored value)."""
        raw = self._fast_key(key)
        if self.journal is not None:
            self._remember(raw)
        self._buffer[raw] = None
        self._objects.pop(raw, None)

    def range(self, start: Any, end: Any) -> Iterator[tuple[Any, Any]]:
        """Entries with ``start <= key < end`` by serialized key, buffered writes included."""
        return self._entries(self._encode_key(start), self._encode_key(end))

    def prefix(self, prefix: Any) -> Iterator[tuple[Any, Any]]:
        """Entries whose serialized key starts with the serialized ``prefix``."""
        raw = self._encode_key(prefix)
        return self._entries(raw, prefix_end(raw))

    def all(self) -> Iterator[tuple[Any, Any]]:
        """Every entry in serialized-key order, buffered writes included."""
        return self._entries(None, None)

    def before_drain(self, name: str, flush: Callable[[], None]) -> None:
        """Call ``flush`` before every `drain` and range read (`prefix`, `range`, `all`):
        a layer that keeps its latest writes in memory (`framework.windows`' states) puts
        them then, so each commit carries them and those reads see them. A flush
        registered again under ``name`` (a task initialised anew over the same store)
        replaces the old one, which runs once first."""
        replaced = self._flushes.get(name)
        if replaced is not None:
            replaced()
        self._flushes[name] = flush

    # -- the worker's API -------------------------------------------------------------

    def _remember(self, raw: bytes) -> None:
        assert self.journal is not None
        self.journal.append((self, raw, self._buffer.get(raw, _MISSING),
                             self._objects.get(raw, _MISSING)))

    @staticmethod
    def undo(journal: list[tuple[TaskStore, bytes, Any, Any]]) -> None:
        """Take back the writes ``journal`` recorded (newest first), across stores, then
        empty it: a failed `process` call leaves no trace in the write buffers."""
        for store, raw, data, obj in reversed(journal):
            store.revert(raw, data, obj)
        journal.clear()

    def revert(self, raw: bytes, data: Any, obj: Any) -> None:
        """Put ``raw``'s buffered write back to what a journal entry recorded of it."""
        if data is _MISSING:
            self._buffer.pop(raw, None)
        else:
            self._buffer[raw] = data
        if obj is _MISSING:
            self._objects.pop(raw, None)
        else:
            self._objects[raw] = obj

    @property
    def is_full(self) -> bool:
        """True when the buffer holds ``max_keys`` keys: the worker should commit now."""
        return len(self._buffer) >= self.max_keys

    @property
    def buffered(self) -> int:
        """How many keys the write buffer holds."""
        return len(self._buffer)

    def drain(self) -> dict[bytes, bytes | None]:
        """Hand every unapplied write to a commit; reads keep seeing them until `apply`.

        If an earlier drain was never applied (its commit failed and is being retried),
        its writes are included, overlaid by newer ones.
        """
        for flush in self._flushes.values():
            flush()
        self._encode_later()
        drained = self._buffer
        if self._pending:
            drained = {**self._pending, **self._buffer}
        self._pending = drained
        self._buffer = {}
        self._objects = {}
        return drained

    def _encode_later(self) -> None:
        """Encode the buffered values kept as they were put (see `_UNENCODED`)."""
        if not self._ints_later:
            return
        objects, encode = self._objects, self._value_to
        buffer = self._buffer
        for raw, data in buffer.items():
            if data is _UNENCODED:
                buffer[raw] = encode(objects[raw])

    def apply(
        self, items: Mapping[bytes, bytes | None], changelog: ChangelogPosition | None
    ) -> None:
        """Write ``items`` (what `drain` returned) and ``changelog`` to the engine in one batch.

        Call only after the commit that carried them succeeded.
        """
        self.engine.write_batch(items, changelog)
        self._pending = None

    def discard(self) -> None:
        """Drop every write not yet applied (after a failed commit)."""
        self._buffer = {}
        self._objects = {}
        self._pending = None

    def close(self) -> None:
        """Close the engine; unapplied writes are dropped (they were never committed)."""
        if self._buffer or self._pending:
            log.debug("store %s of task %s closed with %d unapplied writes", self.name,
                      self.task, len(self._buffer) + len(self._pending or ()))
        self.discard()
        self.engine.close()

    # -- internals --------------------------------------------------------------------

    def _entries(self, start: bytes | None, end: bytes | None) -> Iterator[tuple[Any, Any]]:
        if start is not None and end is not None and start >= end:
            return iter(())
        for flush in self._flushes.values():
            flush()
        # Snapshot the buffered writes now, so writes during iteration cannot break it.
        self._encode_later()
        overlay = dict(self._pending) if self._pending else {}
        overlay.update(self._buffer)
        written = sorted(
            (key, value) for key, value in overlay.items()
            if (start is None or key >= start) and (end is None or key < end)
        )
        merged = _merge(written, self.engine.iterate(start, end))
        return ((self._decode_key(key), self._decode_value(key, value)) for key, value in merged)

    def _where(self) -> str:
        return f"store {self.name!r}" + (f" of task {self.task!r}" if self.task else "")

    def _encode_key(self, key: Any) -> bytes:
        if key is None:
            raise SerdeError(f"{self._where()}: keys cannot be None")
        return self._encode(self._key_serde, key, "key", key)

    def _encode_value(self, key: Any, value: Any) -> bytes:
        return self._encode(self._value_serde, value, "value", key)

    def _encode(self, serde: Serde, obj: Any, what: str, key: Any) -> bytes:
        try:
            data = serde.to_bytes(obj)
        except Exception as exc:
            raise SerdeError(
                f"{self._where()}: cannot serialize the {what} {_short.repr(obj)}"
                f"{'' if what == 'key' else f' of key {_short.repr(key)}'} with the "
                f"{_serde_name(serde)} serde: {exc}"
            ) from exc
        if type(data) is not bytes:
            if not isinstance(data, bytes | bytearray | memoryview):
                raise SerdeError(f"{self._where()}: the {_serde_name(serde)} serde turned the "
                                 f"{what} {_short.repr(obj)} into {type(data).__name__}, "
                                 f"not bytes")
            data = bytes(data)
        return data

    def _decode_key(self, raw: bytes) -> Any:
        try:
            return self._key_serde.from_bytes(raw)
        except Exception as exc:
            raise SerdeError(
                f"{self._where()}: cannot deserialize the stored key {_short.repr(raw)} with "
                f"the {_serde_name(self._key_serde)} serde: {exc}; was the store written "
                f"with another key serde?"
            ) from exc

    def _decode_value(self, raw_key: bytes, data: bytes) -> Any:
        try:
            return self._value_serde.from_bytes(data)
        except Exception as exc:
            raise SerdeError(
                f"{self._where()}: cannot deserialize the value of key {_short.repr(raw_key)} "
                f"({_short.repr(data)}) with the {_serde_name(self._value_serde)} serde: "
                f"{exc}; was the store written with another value serde?"
            ) from exc


def _serde_name(serde: Serde) -> str:
    return str(getattr(serde, "name", type(serde).__name__))


def _merge(
    written: list[tuple[bytes, bytes | None]], stored: Iterator[tuple[bytes, bytes]]
) -> Iterator[tuple[bytes, bytes]]:
    """Merge sorted buffered writes over sorted stored entries; tombstones hide entries."""
    i, n = 0, len(written)
    for key, value in stored:
        while i < n and written[i][0] < key:
            new_key, new_value = written[i]
            i += 1
            if new_value is not None:
                yield new_key, new_value
        if i < n and written[i][0] == key:
            new_value = written[i][1]
            i += 1
            if new_value is not None:
                yield key, new_value
            continue
        yield key, value
    for new_key, new_value in written[i:]:
        if new_value is not None:
            yield new_key, new_value
