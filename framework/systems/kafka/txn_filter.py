"""read_committed on the client: deliver only committed records, in offset order.

Apache Kafka filters a read_committed Fetch itself: it answers only up to the last
stable offset (never past a transaction still open) and lists the aborted transactions,
whose batches `_TxnPartitionRecords` drops. So on Kafka `CommittedFilter` only ever sees
finished transactions and passes them through (`tests/eos/test_read_committed.py` shows
the broker's answer). It is kept for brokers that answer every Fetch as
read_uncommitted but still write the COMMIT/ABORT control batches — those are enough: it
holds every record from the first one of a transaction that is still open, releases the
held prefix at the transaction's COMMIT and drops its records on ABORT, the last stable
offset computed from the log.

`install` lets aiokafka's read_committed fetches keep control batches, for the consumers
`keep_control_batches` marks (sampan's own; any other consumer in the process, a user's
or a test's, keeps aiokafka's behaviour): their ``getmany`` hands out each partition's
records as `TxnChunk`s of columns (`kafka.fetch_columns`: no Python code per record), the
COMMIT/ABORT markers as chunks of their own; their ``getone`` hands out records of
transactional batches and the markers as `TxnRecord`s (with their batch's producer id,
epoch and control type) and other records as the client's own record objects.
`CommittedFilter` takes either, records or chunks.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import aiokafka.consumer.fetcher as _fetcher

from framework.systems.kafka.aiokafka_private import (
    fetcher_isolation_level,
    hand_out_takes,
    set_fetcher_isolation_level,
)
from framework.systems.kafka.fetch_columns import (
    ABORT,
    COMMIT,
    DATA,
    ColumnarPartitionRecords,
    TxnChunk,
    checked_batch,
)

__all__ = ["ABORT", "COMMIT", "DATA", "CommittedFilter", "TxnChunk", "TxnRecord", "install",
           "keep_control_batches"]


class TxnRecord(NamedTuple):
    """A fetched record with what read_committed needs from its batch."""

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes], ...]
    producer_id: int
    producer_epoch: int
    transactional: bool
    control: int  # DATA, or the COMMIT / ABORT marker of (producer_id, producer_epoch)


class _KeepControl(int):
    """READ_COMMITTED as a marked consumer's fetcher holds it: equal to aiokafka's level
    (requests are unchanged), told apart by its type when its fetches are unpacked."""


_KEEP_CONTROL = _KeepControl(_fetcher.READ_COMMITTED)


def keep_control_batches(consumer: Any) -> None:
    """Make a started read_committed ``consumer`` unpack with `_TxnPartitionRecords`:
    its fetches keep control batches and batch metadata, its ``getmany`` hands out
    `FetchedChunks`."""
    if fetcher_isolation_level(consumer) != _fetcher.READ_COMMITTED:
        raise ValueError("keep_control_batches needs a started read_committed consumer")
    install()
    set_fetcher_isolation_level(consumer, _KEEP_CONTROL)


class _TxnPartitionRecords(ColumnarPartitionRecords):
    """aiokafka's per-partition unpacking, keeping control batches and batch metadata
    for consumers marked by `keep_control_batches` (aiokafka's own behaviour otherwise)."""

    def marked(self) -> bool:
        """Whether these are the records of a consumer `keep_control_batches` marked."""
        return type(self._isolation_level) is _KeepControl

    def _unpack_records(self) -> Iterator[Any]:
        if type(self._isolation_level) is not _KeepControl:
            yield from super()._unpack_records()
            return
        records = self._records
        while records.has_next():
            batch = checked_batch(records, self._check_crcs, self._tp)
            control = batch.is_control_batch
            pid = batch.producer_id if batch.producer_id is not None else -1
            if pid >= 0:
                self._consume_aborted_up_to(batch.base_offset)
                if control and self._contains_abort_marker(batch):
                    self._aborted_producers.discard(pid)
                    yield TxnRecord(batch.next_offset - 1, None, None, 0, (), pid,
                                    batch.producer_epoch, True, ABORT)
                    self.next_fetch_offset = batch.next_offset
                    continue
                if batch.is_transactional and pid in self._aborted_producers:
                    self.next_fetch_offset = batch.next_offset  # the broker said: aborted
                    continue
            if control:
                yield TxnRecord(batch.next_offset - 1, None, None, 0, (), pid,
                                batch.producer_epoch, True, COMMIT)
                self.next_fetch_offset = batch.next_offset
                continue
            if not batch.is_transactional:  # no filter state needed: the record as is
                for record in batch:
                    offset = record.offset
                    if offset < self.next_fetch_offset:
                        continue
                    self.next_fetch_offset = offset + 1
                    yield record
                self.next_fetch_offset = batch.next_offset
                continue
            epoch = batch.producer_epoch
            for record in batch:
                if record.offset < self.next_fetch_offset:
                    continue
                self.next_fetch_offset = record.offset + 1
                yield TxnRecord(record.offset, record.key, record.value, record.timestamp,
                                tuple(record.headers), pid, epoch, True, DATA)
            self.next_fetch_offset = batch.next_offset


def _columnar(records: object) -> bool:
    """Whether ``records`` are a marked consumer's (handed out as takes of columns)."""
    return type(records) is _TxnPartitionRecords and records.marked()


def install() -> None:
    """Make aiokafka's fetcher unpack with `_TxnPartitionRecords` and hand out takes of
    columns (idempotent; changes nothing for consumers `keep_control_batches` did not
    mark)."""
    _fetcher.PartitionRecords = _TxnPartitionRecords
    hand_out_takes(_columnar)


@dataclass
class _Txn:
    producer_id: int
    epoch: int
    state: int = DATA  # DATA while open, then COMMIT or ABORT


_CARRY_TXN = frozenset((TxnRecord, TxnChunk))
"""The kinds of fetched items that carry their batch's transaction (all others are plain
records of non-transactional batches)."""


class CommittedFilter:
    """One partition's read_committed view of fetched items in offset order: `TxnRecord`s,
    `TxnChunk`s and plain (non-transactional) records, which are any other record object.
    A chunk is held and released whole (its records are of one transaction, or none)."""

    def __init__(self) -> None:
        self._held: deque[tuple[Any, _Txn | None]] = deque()
        self._open: dict[int, _Txn] = {}

    @property
    def holding(self) -> int | None:
        """Offset of the first record held back by an open transaction, if any."""
        return self._held[0][0].offset if self._held else None

    def release(self, records: Sequence[Any]) -> list[Any]:
        """Feed fetched records in order; returns those now readable, in order."""
        if not self._held and _CARRY_TXN.isdisjoint(map(type, records)):
            return list(records)  # plain records pass through untouched
        out: list[Any] = []
        for record in records:
            self.push(record, out)
        return out

    def push(self, record: Any, out: list[Any]) -> None:
        """Feed the next fetched record; append what became readable to ``out``."""
        if type(record) not in _CARRY_TXN:  # a record of a non-transactional batch
            if self._held:
                self._held.append((record, None))
            else:
                out.append(record)
            return
        if record.control != DATA:
            txn = self._open.get(record.producer_id)
            if txn is not None and txn.epoch <= record.producer_epoch:
                del self._open[record.producer_id]
                txn.state = record.control
                self._release(out)
            return
        if not record.transactional:
            if self._held:
                self._held.append((record, None))
            else:
                out.append(record)
            return
        txn = self._open.get(record.producer_id)
        if txn is not None and txn.epoch < record.producer_epoch:
            txn.state = ABORT  # a newer epoch of the producer: the old transaction is dead
            txn = None
        if txn is None:
            txn = self._open[record.producer_id] = _Txn(record.producer_id,
                                                        record.producer_epoch)
        self._held.append((record, txn))
        self._release(out)

    def _release(self, out: list[Any]) -> None:
        held = self._held
        while held:
            record, txn = held[0]
            if txn is not None and txn.state == DATA:
                return
            held.popleft()
            if txn is None or txn.state == COMMIT:
                out.append(record)
