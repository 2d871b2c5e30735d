"""Fetching from the local log: a fair share per partition, one range scan each.

A fetch first reads the end offsets of the assigned streams (a few tiny rows), so
idle partitions cost nothing, then splits ``max_records`` fairly over the partitions
that have records and reads each with one primary-key range query over its batches,
decoding only the records it returns (`framework.systems.local.batch`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from itertools import repeat
from typing import Any

from framework.frozen import fast_constructor
from framework.systems.base import Headers, Record
from framework.systems.fetched import FetchedColumns
from framework.systems.local.batch import BatchColumns, decode_range
from framework.systems.local.log import LocalLog

__all__ = ["fair_quotas", "read_batch", "read_columns", "read_record_columns"]

# The batches holding offsets >= ?3 and < ?4: from the last batch starting at or before
# ?3 (it may hold it), one primary-key range scan read lazily until enough records came.
_RANGE = (
    "SELECT payload FROM batches WHERE stream_id = ?1 AND partition = ?2 AND base_offset >= "
    "coalesce((SELECT max(base_offset) FROM batches WHERE stream_id = ?1 AND partition = ?2 "
    "AND base_offset <= ?3), ?3) AND base_offset < ?4 ORDER BY base_offset"
)

_record = fast_constructor(Record)

Slot = tuple[str, int]  # (stream, partition)
Columns = tuple[list[int], list[bytes | None], list[bytes | None]]
RecordColumns = tuple[list[int], list[bytes | None], list[bytes | None], list[int], list[Headers]]
"""(offsets, keys, values, timestamps, headers): one list per field, a row per record."""


def fair_quotas(available: Sequence[tuple[Slot, int]], budget: int) -> dict[Slot, int]:
    """Split ``budget`` over partitions with ``available`` records (water-filling).

    Every partition gets an equal share or all it has, whichever is less; what small
    partitions leave goes to the others. Earlier entries get the odd remainder, so
    callers rotate the order between fetches.

    >>> fair_quotas([(("a", 0), 5), (("a", 1), 100), (("a", 2), 100)], 100)
    {('a', 0): 5, ('a', 1): 48, ('a', 2): 47}
    """
    quotas = {slot: 0 for slot, _ in available}
    wanting = [(slot, count) for slot, count in available if count > 0]
    while budget > 0 and wanting:
        share = max(1, budget // len(wanting))
        still = []
        for slot, count in wanting:
            take = min(share, count - quotas[slot], budget)
            quotas[slot] += take
            budget -= take
            if quotas[slot] < count:
                still.append((slot, count))
            if budget == 0:
                break
        wanting = still
    return {slot: quota for slot, quota in quotas.items() if quota > 0}


def read_batch(
    log: LocalLog, positions: Mapping[Slot, int], max_records: int, turn: int,
    counts: Mapping[str, int] | None = None, columns: bool = False,
) -> dict[Slot, list[Record]] | dict[Slot, FetchedColumns]:
    """Up to ``max_records`` records past ``positions``; ``turn`` rotates who goes first.
    ``columns``: each partition's records as `FetchedColumns` instead of `Record`s
    (`LocalConsumer.fetch_raw`).

    Streams or partitions that do not exist (yet) simply yield nothing. ``counts`` are the
    partition counts the reader's job model expects: a stream that has grown since is read
    only up to where each partition ended when it grew (its ``growth`` row, in the same
    snapshot), so no record written under the new count is read under the old one.
    """
    with log.read() as conn:
        ends: dict[Slot, int] = {}
        ids: dict[str, int] = {}
        for stream in sorted({stream for stream, _ in positions}):
            stream_id = log.stream_id(stream)
            if stream_id is None:
                continue
            ids[stream] = stream_id
            caps = _caps(conn, stream_id, counts.get(stream) if counts else None)
            for partition, end in conn.execute(
                "SELECT partition, next_offset FROM partitions WHERE stream_id = ?", (stream_id,)
            ):
                ends[(stream, partition)] = end if caps is None else min(
                    end, caps.get(partition, 0))
        available = [
            (slot, ends[slot] - position)
            for slot, position in sorted(positions.items())
            if ends.get(slot, 0) > position
        ]
        if not available:
            return {}
        turn %= len(available)
        quotas = fair_quotas(available[turn:] + available[:turn], max_records)
        result: dict[Slot, Any] = {}
        for (stream, partition), quota in quotas.items():
            records: list[Record] | FetchedColumns = FetchedColumns() if columns else []
            for offsets, keys, values, timestamps, headers in _scan(
                    conn, ids[stream], partition, positions[(stream, partition)],
                    ends[(stream, partition)], quota):
                if isinstance(records, FetchedColumns):
                    records.extend(offsets, keys, values, timestamps, headers)
                else:
                    records += map(_record, repeat(partition), offsets, keys, values,
                                   timestamps, headers)
            if records:
                result[(stream, partition)] = records
        return result


def _scan(conn: sqlite3.Connection, stream_id: int, partition: int, start: int, end: int,
          limit: int, fields: bool = True) -> Iterator[BatchColumns]:
    """The records with ``start <= offset < end`` of one partition, at most ``limit``, as
    one set of columns per batch, in offset order."""
    cursor = conn.execute(_RANGE, (stream_id, partition, start, end))
    try:
        for (payload,) in cursor:
            columns = decode_range(payload, start, end, limit, fields)
            if columns[0]:
                yield columns
                limit -= len(columns[0])
                if limit <= 0:
                    return
                start = columns[0][-1] + 1
    finally:
        cursor.close()


def _caps(conn: sqlite3.Connection, stream_id: int, expected: int | None
          ) -> dict[int, int] | None:
    """Per partition, the offset a reader expecting ``expected`` partitions stops at; None
    when the stream still has that many (read freely). A growth sampan did not record (made
    outside it) stops the stream where the reader is."""
    if expected is None:
        return None
    (count,) = conn.execute("SELECT partitions FROM streams WHERE id = ?", (stream_id,)).fetchone()
    if count == expected:
        return None
    row = conn.execute("SELECT ends FROM growth WHERE stream_id = ? AND partitions = ?",
                       (stream_id, expected)).fetchone()
    return {} if row is None else {int(p): int(e) for p, e in json.loads(row[0])}


def read_columns(
    log: LocalLog, stream: str, partition: int, start: int, end: int, limit: int
) -> Columns:
    """(offsets, keys, values) of up to ``limit`` records with ``start <= offset < end``;
    plain lists cut from the batches, for restores (no `Record` per row)."""
    offsets: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    with log.read() as conn:
        stream_id = log.stream_id(stream)
        if stream_id is None:
            return [], [], []
        for columns in _scan(conn, stream_id, partition, start, end, limit, fields=False):
            offsets += columns[0]
            keys += columns[1]
            values += columns[2]
    return offsets, keys, values


def read_record_columns(
    log: LocalLog, stream: str, partition: int, start: int, end: int, limit: int
) -> RecordColumns:
    """Every field of up to ``limit`` records with ``start <= offset < end``, as columns:
    one range scan and no `Record` per row, for bulk readers (the Spark DataSource)."""
    result: RecordColumns = ([], [], [], [], [])
    with log.read() as conn:
        stream_id = log.stream_id(stream)
        if stream_id is None:
            return result
        for columns in _scan(conn, stream_id, partition, start, end, limit):
            for into, column in zip(result, columns, strict=True):
                into += column  # type: ignore[operator]
    return result
