"""Fetched records as columns: a local-log batch handed to the worker with no object per
record.

`FetchedColumns` keeps a partition's fetched records as five lists (offsets, keys,
values, timestamps, headers), cut from the log's batch payloads. The worker's hot path
iterates `FetchedColumns.rows` — plain tuples that ``zip`` makes in C and reuses when
each is dropped, half the cost of building a named tuple per record and less to read
back. Everything else sees a read-only sequence of `FetchedRow` (a `FetchedRecord`), made
only when asked for.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple, overload

from framework.systems.base import Headers

__all__ = ["FetchedColumns", "FetchedRow", "RawRow"]

RawRow = tuple[int, "bytes | None", "bytes | None", int, Headers]
"""(offset, key, value, timestamp, headers): one fetched record as the hot path reads it."""


class FetchedRow(NamedTuple):
    """A fetched record without its partition (a `FetchedRecord`)."""

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: Headers


class FetchedColumns(Sequence[FetchedRow]):
    """One partition's fetched records as columns (see the module docstring)."""

    __slots__ = ("headers", "keys", "offsets", "timestamps", "values")

    def __init__(self) -> None:
        self.offsets: list[int] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.timestamps: list[int] = []
        self.headers: list[Headers] = []

    def extend(self, offsets: Sequence[int], keys: Sequence[bytes | None],
               values: Sequence[bytes | None], timestamps: Sequence[int],
               headers: Sequence[Headers]) -> None:
        """Append one decoded batch's columns (all of one length)."""
        if not len(offsets) == len(keys) == len(values) == len(timestamps) == len(headers):
            raise ValueError("fetched columns of different lengths")
        self.offsets += offsets
        self.keys += keys
        self.values += values
        self.timestamps += timestamps
        self.headers += headers

    def rows(self) -> Iterator[RawRow]:
        """Every record as a plain tuple, in offset order (the worker's hot path)."""
        return zip(self.offsets, self.keys, self.values, self.timestamps, self.headers,
                   strict=True)

    def __len__(self) -> int:
        return len(self.offsets)

    @overload
    def __getitem__(self, index: int) -> FetchedRow: ...

    @overload
    def __getitem__(self, index: slice) -> list[FetchedRow]: ...

    def __getitem__(self, index: int | slice) -> FetchedRow | list[FetchedRow]:
        if isinstance(index, slice):
            return [FetchedRow(*row) for row in
                    zip(self.offsets[index], self.keys[index], self.values[index],
                        self.timestamps[index], self.headers[index], strict=True)]
        return FetchedRow(self.offsets[index], self.keys[index], self.values[index],
                          self.timestamps[index], self.headers[index])

    def __iter__(self) -> Iterator[FetchedRow]:
        return (FetchedRow(*row) for row in self.rows())

    def __repr__(self) -> str:
        span = f"{self.offsets[0]}..{self.offsets[-1]}" if self.offsets else "empty"
        return f"FetchedColumns({len(self)} records, offsets {span})"
