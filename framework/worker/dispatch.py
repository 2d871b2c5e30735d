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

from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping, Sequence
from operator import attrgetter

from framework.api import Envelope
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


class _Feed:
    """Where a `process_batch` call is in its batch: the offset of the record it took
    last (``at``), the position past every record it finished with (``done``), how many
    it processed, and the error a bad record raised (the decoding's, not the task's)."""

    __slots__ = ("at", "done", "processed", "raised")

    def __init__(self, position: int) -> None:
        self.at = self.done = position
        self.processed = 0
        self.raised: BaseException | None = None


def _envelopes(feed: _Feed, instance: TaskInstance, ssp: SystemStreamPartition,
               rows: Iterable[RawRow], codec: RecordCodec, policies: ErrorPolicies
               ) -> Generator[Envelope, None, None]:
    """The envelopes of ``rows`` past ``feed.done``, decoded one at a time as
    `dispatch_one` decodes them (a bad record: ``errors.policy``), noted in ``feed``: a
    record is done when the task asks for the next one."""
    position = feed.done
    key_from, value_from, short_json = codec.decoding(ssp)
    for offset, raw_key, raw_value, timestamp, headers in rows:
        if offset < position:
            continue  # already processed (a rewind for another reader)
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
            record = FetchedRow(offset, raw_key, raw_value, timestamp, headers)
            try:  # the careful path: the record after all, or its SerdeError
                message = codec.decode(ssp, record)
            except SerdeError as error:
                try:
                    policies.bad_record(ssp, as_record(ssp.partition, record), error,
                                        [instance])
                except BaseException as stopped:
                    feed.raised = stopped
                    raise
                feed.done = offset + 1
                continue
        feed.at = offset
        yield message
        feed.done = offset + 1
        feed.processed += 1


async def dispatch_batch(instance: TaskInstance, ssp: SystemStreamPartition,
                         records: Sequence[FetchedRecord], codec: RecordCodec,
                         policies: ErrorPolicies) -> None:
    """Every record of ``records`` not yet processed by ``instance``, in one call of its
    task's `StreamTask.process_batch` (``instance.process_batch``)."""
    position = instance.positions.get(ssp, 0)
    rows: Iterable[RawRow] = (records.rows() if type(records) is FetchedColumns
                              else map(_fields, records))
    feed = _Feed(position)
    envelopes = _envelopes(feed, instance, ssp, rows, codec, policies)
    process_batch = instance.process_batch
    assert process_batch is not None
    try:
        result = process_batch(envelopes, instance, instance)
        if result is not None:  # an `async def process_batch`
            await result
        left = next(envelopes, None)
        if left is not None:
            raise ProcessingError(
                f"task {instance.name!r} failed on {ssp} offset {left.offset}: its "
                f"process_batch returned before taking that record (and any after it); "
                f"it must take every envelope it is given, as process takes each")
    except StoreError:
        raise  # the store failed, not the task: never skipped, never blamed on it
    except Exception as error:
        if error is feed.raised or isinstance(error, ProcessingError):
            raise
        raise policies.failed(instance, ssp, feed.at, error) from error
    finally:
        envelopes.close()
        if feed.done != position:
            instance.positions[ssp] = feed.done
        instance.processed += feed.processed


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
