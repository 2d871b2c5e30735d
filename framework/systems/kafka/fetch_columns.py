"""A partition's fetched record batches unpacked as columns: sampan's Kafka read path.

aiokafka's own read hands out one record at a time through Python code: a generator
step per record (the offset check, the position update) and a loop in ``getall`` that
appends each to a list; the worker then read each record's fields into a tuple. Here a
fetch's batches are unpacked a batch at a time instead: the batch's records are listed
by aiokafka's C iterator and its five columns cut with one C-level ``map`` each, so no
Python code runs per record between the fetch response and the worker's dispatch
(`FetchedColumns`, which the local log hands out too).

A partition's take is a sequence of `TxnChunk`s in offset order — consecutive plain
(non-transactional) batches in one chunk, a transaction's batches in chunks of their
producer, each COMMIT/ABORT marker a chunk of its own — which `CommittedFilter` holds and
releases as it held records (`kafka.txn_filter`). Batches the broker listed as aborted are
skipped, as aiokafka skips them.
"""

from __future__ import annotations

from collections.abc import Iterator
from operator import attrgetter
from typing import Any, NamedTuple

import aiokafka.consumer.fetcher as _fetcher
from aiokafka.errors import CorruptRecordException

from framework.systems.fetched import FetchedColumns

__all__ = ["ABORT", "COMMIT", "DATA", "ColumnarPartitionRecords", "FetchedChunks", "TxnChunk",
           "checked_batch", "merged"]

DATA, COMMIT, ABORT = 0, 1, 2

_offset = attrgetter("offset")
_key = attrgetter("key")
_value = attrgetter("value")
_timestamp = attrgetter("timestamp")
_headers = attrgetter("headers")


def checked_batch(records: Any, check_crcs: bool, tp: Any) -> Any:
    """The next record batch of a partition's fetched ``records``, its CRC checked when
    ``check_crcs`` (control batches are not: some brokers write them with a zero CRC)."""
    batch = records.next_batch()
    if check_crcs and not batch.is_control_batch and not batch.validate_crc():
        raise CorruptRecordException(f"Invalid CRC - {tp}")
    return batch


class TxnChunk(NamedTuple):
    """Consecutive fetched records of one kind, with what read_committed needs: plain
    records (``transactional`` False), one producer's transactional records, or a
    COMMIT/ABORT marker of (``producer_id``, ``producer_epoch``) with no columns."""

    offset: int  # the first record's (a marker's own offset)
    producer_id: int
    producer_epoch: int
    transactional: bool
    control: int  # DATA, or the COMMIT / ABORT marker
    columns: FetchedColumns | None


class FetchedChunks:
    """What a take hands aiokafka's ``fetched_records`` for one partition: the chunks,
    counted in records (and markers), as aiokafka counts ``max_records``."""

    __slots__ = ("chunks", "count", "end")

    def __init__(self, chunks: list[TxnChunk], count: int, end: int) -> None:
        self.chunks = chunks
        self.count = count
        self.end = end
        """The position after the take: past every record and marker it went over."""

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[TxnChunk]:
        return iter(self.chunks)


def merged(chunks: list[TxnChunk]) -> FetchedColumns | None:
    """The records of ``chunks`` (released by `CommittedFilter`) as one batch of
    columns, in order; None when they hold none."""
    columns = [chunk.columns for chunk in chunks if chunk.columns]
    if not columns:
        return None
    if len(columns) == 1:
        return columns[0]
    out = FetchedColumns()
    for one in columns:
        out.extend(one.offsets, one.keys, one.values, one.timestamps, one.headers)
    return out


def _columns(records: list[Any], start: int) -> FetchedColumns:
    """``records`` (a batch's, in offset order) from offset ``start`` on, as columns."""
    if records and records[0].offset < start:  # a compressed batch read from its middle
        records = [record for record in records if record.offset >= start]
    out = FetchedColumns()
    out.offsets = list(map(_offset, records))
    out.keys = list(map(_key, records))
    out.values = list(map(_value, records))
    out.timestamps = list(map(_timestamp, records))
    out.headers = list(map(_headers, records))
    return out


def _cut(columns: FetchedColumns, count: int) -> tuple[FetchedColumns, FetchedColumns]:
    """``columns`` split after its first ``count`` records."""
    head, tail = FetchedColumns(), FetchedColumns()
    for name in FetchedColumns.__slots__:
        whole = getattr(columns, name)
        setattr(head, name, whole[:count])
        setattr(tail, name, whole[count:])
    return head, tail


class ColumnarPartitionRecords(_fetcher.PartitionRecords):  # type: ignore[misc]
    """aiokafka's per-partition unpacking with a take of columns (`take`) beside its
    record by record iteration (which `kafka.txn_filter` keeps for ``getone``)."""

    next_fetch_offset: int

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._rest: tuple[TxnChunk, int] | None = None
        """The part of a batch a take's limit cut off, and the offset after the batch."""

    def take(self, max_records: int | None) -> tuple[FetchedChunks, bool]:
        """Up to ``max_records`` records and markers from ``next_fetch_offset`` on, which
        moves past them, and whether every batch of the fetch is now taken."""
        limit = (1 << 62) if max_records is None else max_records
        chunks: list[TxnChunk] = []
        count = 0
        while count < limit:
            rest = self._rest if self._rest is not None else self._next_chunk()
            if rest is None:
                return FetchedChunks(chunks, count, self.next_fetch_offset), True
            chunk, next_offset = rest
            columns = chunk.columns
            size = 1 if columns is None else len(columns)
            if size > limit - count:
                assert columns is not None  # a marker's size is 1, and count < limit
                head, tail = _cut(columns, limit - count)
                self._rest = chunk._replace(offset=tail.offsets[0], columns=tail), next_offset
                chunk, size = chunk._replace(columns=head), len(head)
                self.next_fetch_offset = tail.offsets[0]
            else:
                self._rest = None
                self.next_fetch_offset = next_offset
                if size == 0:
                    continue  # a batch compaction emptied, or one read past its end
            count += size
            _add(chunks, chunk)
        done = self._rest is None and not self._records.has_next()
        return FetchedChunks(chunks, count, self.next_fetch_offset), done

    def _next_chunk(self) -> tuple[TxnChunk, int] | None:
        """The next batch worth handing out, as a chunk, and the offset after it (None
        when none is left); aborted batches are passed over."""
        records = self._records
        while records.has_next():
            batch = checked_batch(records, self._check_crcs, self._tp)
            control = batch.is_control_batch
            pid = batch.producer_id if batch.producer_id is not None else -1
            epoch = batch.producer_epoch
            next_offset = batch.next_offset
            if pid >= 0:
                self._consume_aborted_up_to(batch.base_offset)
                if control and self._contains_abort_marker(batch):
                    self._aborted_producers.discard(pid)
                    return TxnChunk(next_offset - 1, pid, epoch, True, ABORT, None), next_offset
                if batch.is_transactional and pid in self._aborted_producers:
                    self.next_fetch_offset = next_offset  # the broker said: aborted
                    continue
            if control:
                return TxnChunk(next_offset - 1, pid, epoch, True, COMMIT, None), next_offset
            columns = _columns(list(batch), self.next_fetch_offset)
            first = columns.offsets[0] if columns.offsets else next_offset
            if batch.is_transactional:
                return TxnChunk(first, pid, epoch, True, DATA, columns), next_offset
            return TxnChunk(first, -1, 0, False, DATA, columns), next_offset
        return None


def _add(chunks: list[TxnChunk], chunk: TxnChunk) -> None:
    """Append ``chunk`` to ``chunks``, into the last one where it is of the same kind."""
    last = chunks[-1] if chunks else None
    added = chunk.columns
    if (last is not None and added is not None and last.columns is not None
            and last[1:4] == chunk[1:4]):  # producer, epoch, transactional
        last.columns.extend(added.offsets, added.keys, added.values, added.timestamps,
                            added.headers)
    else:
        chunks.append(chunk)
