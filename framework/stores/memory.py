"""In-memory `StoreEngine`: a dict plus a sorted key list for ordered iteration.

State lives only as long as the process, so every start restores it fully from the
changelog (its position starts as None). Meant for small stores and for tests.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator, Mapping

from framework.stores.base import ChangelogPosition

__all__ = ["MemoryEngine"]

# When a batch adds or removes more than 1/8 of the keys, re-sorting beats one-by-one edits.
_RESORT_FRACTION = 8


class MemoryEngine:
    """A `StoreEngine` held in process memory.

        >>> engine = MemoryEngine()
        >>> engine.write_batch({b"b": b"2", b"a": b"1"}, ChangelogPosition("log", 0, 2))
        >>> list(engine.iterate())
        [(b'a', b'1'), (b'b', b'2')]
        >>> engine.changelog_position()
        ChangelogPosition(stream='log', partition=0, offset=2)
    """

    def __init__(self, name: str = "memory") -> None:
        self.name = name
        self._data: dict[bytes, bytes] = {}
        self._keys: list[bytes] = []  # sorted; always the keys of _data
        self._position: ChangelogPosition | None = None

    def get(self, key: bytes) -> bytes | None:
        return self._data.get(key)

    def iterate(
        self, start: bytes | None = None, end: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        lo = 0 if start is None else bisect_left(self._keys, start)
        hi = len(self._keys) if end is None else bisect_left(self._keys, end)
        # A copy of the key slice, so writes during iteration cannot shift it.
        return self._entries(self._keys[lo:hi])

    def _entries(self, keys: list[bytes]) -> Iterator[tuple[bytes, bytes]]:
        data = self._data
        for key in keys:
            value = data.get(key)
            if value is not None:
                yield key, value

    def write_batch(
        self, items: Mapping[bytes, bytes | None], changelog: ChangelogPosition | None
    ) -> None:
        data = self._data
        added: list[bytes] = []
        removed: list[bytes] = []
        for key, value in items.items():
            if value is None:
                if data.pop(key, None) is not None:
                    removed.append(key)
            else:
                if key not in data:
                    added.append(key)
                data[key] = value
        keys = self._keys
        if (len(added) + len(removed)) * _RESORT_FRACTION > len(keys):
            self._keys = sorted(data)
        else:
            for key in removed:
                del keys[bisect_left(keys, key)]
            for key in added:
                insort(keys, key)
        if changelog is not None:
            self._position = changelog

    def changelog_position(self) -> ChangelogPosition | None:
        return self._position

    def wipe(self) -> None:
        self._data = {}
        self._keys = []
        self._position = None

    def count(self) -> int:
        return len(self._data)

    def close(self) -> None:
        """Nothing to release; the data stays readable until the object is dropped."""
