"""What a worker does when a record cannot be decoded or its task's `process` raises:
``[errors] policy`` and ``process_policy`` (fail, skip, dead-letter)."""

from __future__ import annotations

import logging
import traceback
from pathlib import Path
from typing import Protocol

from framework.api import Envelope
from framework.config import ErrorsConfig, StreamConfig
from framework.errors import ProcessingError, SerdeError, StoreError
from framework.stores.buffer import TaskStore
from framework.systems.base import Record
from framework.worker.codec import RecordCodec
from framework.worker.dead_letter import dead_letter_record
from framework.worker.instance import TaskInstance
from groupers import SystemStreamPartition

__all__ = ["ErrorPolicies", "UndecodableRecordError", "describe"]

log = logging.getLogger(__name__)


class UndecodableRecordError(ProcessingError):
    """``policy = "fail"`` met a record it cannot decode: the worker commits what it
    processed before it (nothing of the record was), then stops with this error, so a
    reset to the record's offset + 1 skips exactly that record."""


def describe(error: BaseException) -> str:
    """``"TypeError: … (task.py:12 in process)"``: the error and where the task raised it."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f" ({Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name})" \
        if frames else ""
    return f"{type(error).__name__}: {error}{where}"


class ErrorSettings(Protocol):
    """The settings the error policies read (a `JobConfig` is one): ``[errors]``, the
    dead-letter stream's declaration, and the job file to name in the fix."""

    @property
    def errors(self) -> ErrorsConfig: ...
    @property
    def path(self) -> Path: ...
    def stream(self, qualified: str) -> StreamConfig: ...


class ErrorPolicies:
    """The job's error policies, applied to one worker's tasks."""

    def __init__(self, config: ErrorSettings, codec: RecordCodec) -> None:
        self._config = config
        self._codec = codec

    async def process_guarded(self, instance: TaskInstance, envelope: Envelope, record: Record,
                              journal: list[tuple[TaskStore, bytes, object, object]]) -> None:
        """``process`` under ``process_policy`` skip or dead-letter: a call that raises is
        undone (store writes, sends, commit/shutdown requests), then the record is passed."""
        journal.clear()
        outputs, raw_outputs = len(instance.outputs), len(instance.raw_outputs)
        requests = (instance.commit_requested, instance.shutdown_requested)
        try:
            await instance.process(envelope)
        except StoreError:
            raise
        except Exception as error:
            # Take back whatever the failed call did, then skip or dead-letter the record.
            TaskStore.undo(journal)
            del instance.outputs[outputs:], instance.raw_outputs[raw_outputs:]
            instance.commit_requested, instance.shutdown_requested = requests
            self.process_failed(instance, envelope.ssp, record, error)

    def failed(self, instance: TaskInstance, ssp: SystemStreamPartition, offset: int,
               error: Exception) -> ProcessingError:
        """``process_policy = "fail"``: log the traceback; the one-line error to raise."""
        log.error("task %r failed on %s offset %d", instance.name, ssp, offset,
                  exc_info=error)
        return ProcessingError(
            f"task {instance.name!r} failed on {ssp} offset {offset}: {describe(error)}; fix "
            f"the task and restart (the record is processed again from the last commit), or "
            f'set [errors] process_policy = "skip" or "dead-letter" to move past such records')

    def process_failed(self, instance: TaskInstance, ssp: SystemStreamPartition,
                       record: Record, error: Exception) -> None:
        """``process_policy`` skip or dead-letter: count the record as skipped, log it,
        and under dead-letter queue it (with the traceback) for the next commit."""
        policy = self._config.errors.process_policy
        log.warning("task %r skipped %s offset %d: %s (errors.process_policy=%s)",
                    instance.name, ssp, record.offset, describe(error), policy)
        instance.skip(ssp, record.offset)
        if policy == "dead-letter" and self._config.errors.dead_letter_stream:
            stream = self._config.stream(self._config.errors.dead_letter_stream)
            text = "".join(traceback.format_exception(error))
            instance.raw_outputs.append((stream.system, dead_letter_record(
                stream.stream, ssp, record, error, task=instance.name, traceback=text,
                serdes=self._codec.serdes(stream.qualified))))

    def bad_record(self, ssp: SystemStreamPartition, record: Record, error: SerdeError,
                   targets: list[TaskInstance]) -> None:
        """``policy``: fail (raise), or skip the record for ``targets`` (and dead-letter it)."""
        policy = self._config.errors.policy
        if policy == "fail":
            qualified = f"{ssp.system}.{ssp.stream}"
            raise UndecodableRecordError(
                f"{error}; errors.policy is 'fail', so the job stops at it. To move past it, "
                f"set [errors] policy = \"skip\" or \"dead-letter\" (for every record that "
                f"cannot be decoded), or skip this one record: stop the job, run `sampan "
                f"streams reset-offsets {qualified} --job {self._config.path} --partition "
                f"{ssp.partition} --to-offset {record.offset + 1}` and start it again. Then "
                f"fix the producer that wrote it")
        log.warning("%s (errors.policy=%s)", error, policy)
        for instance in targets:
            instance.skip(ssp, record.offset)
        if policy == "dead-letter" and self._config.errors.dead_letter_stream:
            stream = self._config.stream(self._config.errors.dead_letter_stream)
            targets[0].raw_outputs.append(
                (stream.system, dead_letter_record(stream.stream, ssp, record, error,
                                                   serdes=self._codec.serdes(stream.qualified))))
