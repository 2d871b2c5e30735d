"""Hand a fetched batch of one SSP to the tasks reading it: the worker's hot path.

`dispatch_one` is the common case (one reader, ``process_policy = "fail"``): each record
is read as a plain tuple (`FetchedColumns.rows` on the local log, no object per record;
one ``attrgetter`` call per Kafka record), decoded inline (the SSP's serdes resolved
once, `RecordCodec.decoding`) and goes to ``process`` with no await unless it returns an
awaitable; positions are brought up to date once per batch. One envelope lives at a
time: a batch's worth of live envelopes would only feed the cyclic garbage collector.
`dispatch_batch` is the common case for a task that offers `StreamTask.process_batch`:
one call for the whole batch, its envelopes decoded as the task takes them (the same
way). `dispatch_many` serves several readers of one SSP (broadcast inputs, a rewind for
one of them) and the skip / dead-letter policies, record by record.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Awaitable, Callable, Generator, Iterable, Iterator, Mapping, Sequence
from operator import attrgetter
from typing import Any

from framework.api import BatchColumns, ColumnarBatch, Envelope
from framework.errors import ProcessingError, SerdeError, StoreError
from framework.stores.buffer import TaskStore
from framework.systems.base import Consumer, FetchedRecord, RawFetcher, Record, as_record
from framework.systems.fetched import FetchedColumns, FetchedRow, RawRow
from framework.worker.codec import (
    NO_HEADERS,
    SHORT_JSON,
    RecordCodec,
    envelope,
    header_map,
)
from framework.worker.instance import TaskInstance
from framework.worker.policies import ErrorPolicies
from groupers import SystemStreamPartition

__all__ = ["Batch", "Journals", "dispatch_batch", "dispatch_many", "dispatch_one", "fetcher"]

Batch = Mapping[SystemStreamPartition, Sequence[FetchedRecord]]
"""A fetched batch: each SSP's records in offset order."""

_fields = attrgetter("offset", "key", "value", "timestamp", "headers")
"""A `FetchedRecord` as the `RawRow` tuple `dispatch_one` reads (one C call)."""

Journals = Mapping[str, list[tuple[TaskStore, bytes, object, object]]]
"""Task → the journal that undoes a failed ``process`` call's store writes (skip and
dead-letter policies only)."""


def fetcher(consumer: Consumer) -> Callable[[int, int], Awaitable[Batch]]:
    """``(max_records, timeout_ms) → batch`` of ``consumer``: its ``fetch_raw`` where it
    has one (Kafka: no copy per record into a `Record`), else its ``fetch``."""
    if isinstance(consumer, RawFetcher):
        return consumer.fetch_raw
    return consumer.fetch


async def dispatch_one(instance: TaskInstance, ssp: SystemStreamPartition,
                       records: Sequence[FetchedRecord], codec: RecordCodec,
                       policies: ErrorPolicies) -> None:
    """Every record of ``records`` not yet processed by ``instance``, in order."""
    position = instance.positions.get(ssp, 0)
    key_from, value_from, short_json = codec.decoding(ssp)
    process = instance.task.process
    done, count = position, 0
    rows: Iterable[RawRow] = (records.rows() if type(records) is FetchedColumns
                              else map(_fields, records))
    try:
        for offset, raw_key, raw_value, timestamp, headers in rows:
            if offset < position:
                continue  # already processed (a rewind for another reader)
            try:  # `RecordCodec.decoder`, inline: one call less per record
                key = raw_key
                if key is not None:
                    key = key_from(key)
                value = raw_value
                if value is not None:
                    value = (short_json(value) if short_json is not None
                             and len(value) < SHORT_JSON else value_from(value))
                message = envelope(ssp, offset, key, value, timestamp,
                                   header_map(headers) if headers else NO_HEADERS)
            except Exception:
                record = FetchedRow(offset, raw_key, raw_value, timestamp, headers)
                try:  # the careful path: the record after all, or its SerdeError
                    message = codec.decode(ssp, record)
                except SerdeError as error:
                    policies.bad_record(ssp, as_record(ssp.partition, record), error,
                                        [instance])
                    done = offset + 1
                    continue
            try:
                result = process(message, instance, instance)
                if result is not None:  # an `async def process`
                    await result
            except StoreError:
                raise  # the store failed, not the task: never skipped, never blamed on it
            except Exception as error:
                raise policies.failed(instance, ssp, offset, error) from error
            done = offset + 1
            count += 1
    finally:
        if done != position:
            instance.positions[ssp] = done
        instance.processed += count


class _Feed(ColumnarBatch):
    """The records of one batch as `StreamTask.process_batch` takes them: an iterator of
    envelopes decoded one at a time (as `dispatch_one` decodes them; a bad record:
    ``errors.policy``), or, all at once, columns (`ColumnarBatch.columns`). It keeps the
    position past the records the task finished (``done``: a record is finished when the
    task asks for the next one, or for the rest as columns), how many it processed
    (``count``), the offset of the one it holds (``at``: an exception is blamed on it) and
    the error a bad record raised (``raised``: the decoding's, not the task's)."""

    __slots__ = ("_codec", "_columns", "_envelopes", "_holding", "_instance", "_pending",
                 "_policies", "_raw", "_ssp", "at", "count", "done", "end", "raised")

    def __init__(self, instance: TaskInstance, ssp: SystemStreamPartition,
                 records: Sequence[FetchedRecord], codec: RecordCodec,
                 policies: ErrorPolicies) -> None:
        position = instance.positions.get(ssp, 0)
        self._instance, self._ssp, self._codec, self._policies = instance, ssp, codec, policies
        raw: tuple[Sequence[Any], ...]
        if type(records) is FetchedColumns:
            raw = (records.offsets, records.keys, records.values, records.timestamps,
                   records.headers)
        else:
            raw = tuple(zip(*map(_fields, records), strict=True)) or ((), (), (), (), ())
        start = bisect_left(raw[0], position)  # before it: processed (a rewind)
        self._raw: tuple[Sequence[Any], ...] = (
            tuple(column[start:] for column in raw) if start else raw)
        self.end = raw[0][-1] + 1 if len(raw[0]) > start else position
        """The position past the batch: every record done, once the task's call returns."""
        self.done = self.at = position
        self.count = 0
        self.raised: BaseException | None = None
        self._holding = False
        """Whether the task holds an envelope (taken, not finished)."""
        self._columns: Sequence[int] = ()
        """The offsets of the records handed out as columns, not yet accounted for."""
        self._pending: tuple[int, BaseException] | None = None
        """A record `columns` could not decode (its offset, its error): the columns stop
        before it, and the error is raised once the task's call returns."""
        self._envelopes = self._decoded(*self._raw)

    def __iter__(self) -> Iterator[Envelope]:
        return self._envelopes  # the generator itself: no call of ours per record

    def __next__(self) -> Envelope:
        return next(self._envelopes)

    def close(self) -> None:
        self._envelopes.close()

    def _decoded(self, *raw: Sequence[Any]) -> Generator[Envelope, None, None]:
        """The envelopes of the rows ``raw`` (columns), each finished when the next is
        asked for."""
        ssp = self._ssp
        key_from, value_from, short_json = self._codec.decoding(ssp)
        for offset, raw_key, raw_value, timestamp, headers in zip(*raw, strict=True):
            try:  # `RecordCodec.decoder`, inline
                key = raw_key
                if key is not None:
                    key = key_from(key)
                value = raw_value
                if value is not None:
                    value = (short_json(value) if short_json is not None
                             and len(value) < SHORT_JSON else value_from(value))
                message = envelope(ssp, offset, key, value, timestamp,
                                   header_map(headers) if headers else NO_HEADERS)
            except Exception:
                found = self._careful(offset, raw_key, raw_value, timestamp, headers)
                if found is None:
                    self.done = offset + 1  # a bad record, passed
                    continue
                message = found
            self.at, self._holding = offset, True
            yield message
            self._holding = False
            self.done = offset + 1
            self.count += 1

    def _careful(self, offset: int, raw_key: bytes | None, raw_value: bytes | None,
                 timestamp: int, headers: Any) -> Envelope | None:
        """A record the inline decoding refused, decoded after all (`RecordCodec.decode`),
        or None: a bad record, passed under ``errors.policy`` (else its error raised)."""
        ssp = self._ssp
        record = FetchedRow(offset, raw_key, raw_value, timestamp, headers)
        try:
            return self._codec.decode(ssp, record)
        except SerdeError as error:
            try:
                self._policies.bad_record(ssp, as_record(ssp.partition, record), error,
                                          [self._instance])
            except BaseException as stopped:
                self.raised = stopped
                raise
            return None

    def columns(self) -> BatchColumns:
        """`ColumnarBatch.columns`: every record not taken yet, decoded as the envelopes
        would be — in one call per column where each record takes the inline decoding
        (no None, JSON values short enough for orjson), else one at a time; a record that
        cannot be decoded under ``errors.policy = "fail"`` ends them (its error is raised
        when the task's call returns, as `dispatch_one` raises it after the records
        before it)."""
        ssp = self._ssp
        self._envelopes.close()
        if self._holding:  # asking for the rest finishes the envelope it holds
            self._holding = False
            self.done = self.at + 1
            self.count += 1
        left = bisect_left(self._raw[0], self.done)
        offsets: Sequence[int]
        timestamps: Sequence[int]
        offsets, raw_keys, raw_values, timestamps, headers = (
            [column[left:] for column in self._raw] if left else self._raw)
        self._raw = ((), (), (), (), ())
        key_from, value_from, short_json = self._codec.decoding(ssp)
        try:
            if None in raw_keys or None in raw_values:
                raise ValueError("a null key or value: one record at a time")
            keys = list(map(key_from, raw_keys))
            if short_json is not None and max(map(len, raw_values), default=0) < SHORT_JSON:
                values = list(map(short_json, raw_values))
            else:
                values = list(map(value_from, raw_values))
        except Exception:
            offsets, keys, values, timestamps = self._one_at_a_time(
                offsets, raw_keys, raw_values, timestamps, headers)
        if offsets:
            self.at = offsets[0]
        self._columns = offsets
        return BatchColumns(ssp, offsets, keys, values, timestamps)

    def _one_at_a_time(self, *raw: Sequence[Any]) -> tuple[list[Any], ...]:
        """`columns` of the rows ``raw`` decoded as `_decoded` decodes them (bad records
        passed under ``errors.policy``), up to one that stops the job (`_pending`)."""
        decoded: list[Envelope] = []
        done = self.done
        rows = self._decoded(*raw)
        try:
            decoded.extend(rows)  # each finished as the next is decoded: undone below
        except BaseException as error:
            if error is not self.raised:
                raise
            self._pending = (self.done, error)  # past the records before it
        finally:
            rows.close()
        self._holding, self.done, self.count = False, done, self.count - len(decoded)
        return ([m.offset for m in decoded], [m.key for m in decoded],
                [m.value for m in decoded], [m.timestamp for m in decoded])

    def failed_at(self, offset: int) -> None:
        """`ColumnarBatch.failed_at`: the records of the columns before ``offset`` are
        done, the one at it is blamed."""
        columns, self._columns = self._columns, ()
        self.count += bisect_left(columns, offset)
        self.done = self.at = offset

    def finish(self) -> None:
        """The task's call returned having taken every record: the columns handed out are
        done — up to the record they stopped before, whose error is raised now."""
        self.count += len(self._columns)
        self._columns = ()
        if self._pending is not None:
            self.done, error = self._pending
            raise error
        self.done = self.end


async def dispatch_batch(instance: TaskInstance, ssp: SystemStreamPartition,
                         records: Sequence[FetchedRecord], codec: RecordCodec,
                         policies: ErrorPolicies) -> None:
    """Every record of ``records`` not yet processed by ``instance``, in one call of its
    task's `StreamTask.process_batch` (``instance.process_batch``) with a `_Feed`."""
    position = instance.positions.get(ssp, 0)
    feed = _Feed(instance, ssp, records, codec, policies)
    process_batch = instance.process_batch
    assert process_batch is not None
    try:
        result = process_batch(feed, instance, instance)
        if result is not None:  # an `async def process_batch`
            await result
        left = next(feed, None)
        if left is not None:
            raise ProcessingError(
                f"task {instance.name!r} failed on {ssp} offset {left.offset}: its "
                f"process_batch returned before taking that record (and any after it); "
                f"it must take every envelope it is given, as process takes each")
        feed.finish()
    except StoreError:
        raise  # the store failed, not the task: never skipped, never blamed on it
    except Exception as error:
        if error is feed.raised or isinstance(error, ProcessingError):
            raise
        raise policies.failed(instance, ssp, feed.at, error) from error
    finally:
        feed.close()
        if feed.done != position:
            instance.positions[ssp] = feed.done
        instance.processed += feed.count


async def dispatch_many(readers: Sequence[TaskInstance], ssp: SystemStreamPartition,
                        fetched: Sequence[FetchedRecord], codec: RecordCodec,
                        policies: ErrorPolicies, journals: Journals) -> None:
    """Each record to every reader whose position has not passed it."""
    for record in [as_record(ssp.partition, one) for one in fetched]:
        targets = [r for r in readers if r.positions.get(ssp, 0) <= record.offset]
        if not targets:
            continue
        try:
            envelope = codec.decode(ssp, record)
        except SerdeError as error:
            policies.bad_record(ssp, record, error, targets)
            continue
        for instance in targets:
            await _process(instance, envelope, record, policies, journals)


async def _process(instance: TaskInstance, envelope: Envelope, record: Record,
                   policies: ErrorPolicies, journals: Journals) -> None:
    journal = journals.get(instance.name)
    if journal is None:
        try:
            await instance.process(envelope)
        except StoreError:
            raise
        except Exception as error:
            raise policies.failed(instance, envelope.ssp, envelope.offset, error) from error
        return
    await policies.process_guarded(instance, envelope, record, journal)
