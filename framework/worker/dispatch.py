"""Hand a fetched batch of one SSP to the tasks reading it: the worker's hot path.

`dispatch_one` is the common case (one reader, ``process_policy = "fail"``): no await per
record unless the task's ``process`` returns an awaitable, positions brought up to date
once per batch. `dispatch_many` serves several readers of one SSP (broadcast inputs,
a rewind for one of them) and the skip / dead-letter policies, record by record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from framework.api import Envelope
from framework.errors import SerdeError, StoreError
from framework.stores.buffer import TaskStore
from framework.systems.base import Record
from framework.worker.codec import RecordCodec
from framework.worker.instance import TaskInstance
from framework.worker.policies import ErrorPolicies
from groupers import SystemStreamPartition

__all__ = ["Journals", "dispatch_many", "dispatch_one"]

Journals = Mapping[str, list[tuple[TaskStore, bytes, object, object]]]
"""Task → the journal that undoes a failed ``process`` call's store writes (skip and
dead-letter policies only)."""


async def dispatch_one(instance: TaskInstance, ssp: SystemStreamPartition,
                       records: Sequence[Record], codec: RecordCodec,
                       policies: ErrorPolicies) -> None:
    """Every record of ``records`` not yet processed by ``instance``, in order."""
    position = instance.positions.get(ssp, 0)
    decode = codec.decoder(ssp)
    process = instance.task.process
    done, count = position, 0
    try:
        for record in records:
            offset = record.offset
            if offset < position:
                continue  # already processed (a rewind for another reader)
            try:
                envelope = decode(record)
            except SerdeError as error:
                policies.bad_record(ssp, record, error, [instance])
                done = offset + 1
                continue
            try:
                result = process(envelope, instance, instance)
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


async def dispatch_many(readers: Sequence[TaskInstance], ssp: SystemStreamPartition,
                        records: Sequence[Record], codec: RecordCodec,
                        policies: ErrorPolicies, journals: Journals) -> None:
    """Each record to every reader whose position has not passed it."""
    for record in records:
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
