"""Handing a fetched batch to the tasks reading it (`framework.worker.dispatch`: the hot
path) and windowing them, with the call in progress kept for the task watchdog."""

from __future__ import annotations

import time
from collections.abc import Sequence

from framework.config import JobConfig
from framework.metrics import WorkerMetrics
from framework.systems.base import FetchedRecord
from framework.worker.codec import RecordCodec
from framework.worker.dispatch import dispatch_batch, dispatch_many, dispatch_one
from framework.worker.instance import TaskInstance
from framework.worker.policies import ErrorPolicies, UndecodableRecordError
from framework.worker.routing import Routing
from framework.worker.tasks import Tasks
from framework.worker.watchdog import Busy
from groupers import SystemStreamPartition

__all__ = ["Processing"]


class Processing:
    """Calls the tasks' ``process`` (or ``process_batch``) and ``window``."""

    def __init__(self, config: JobConfig, routing: Routing, tasks: Tasks,
                 metrics: WorkerMetrics) -> None:
        self.codec = RecordCodec(config)
        self.policies = ErrorPolicies(config, self.codec)
        self.routing = routing
        self.tasks = tasks
        self.metrics = metrics
        self.busy: Busy | None = None
        """The call in progress, for the task watchdog (`framework.worker.watchdog`)."""
        self.undecodable: UndecodableRecordError | None = None
        """The record ``policy = "fail"`` stopped at: raised once what preceded it is
        committed."""

    async def dispatch(self, ssp: SystemStreamPartition,
                       records: Sequence[FetchedRecord]) -> bool:
        """Process ``records`` of ``ssp`` by every task reading it; False when one could
        not be decoded under ``policy = "fail"`` (`undecodable`: the worker stops once
        what came before it is committed)."""
        readers = self.routing.routes.get(ssp, ())
        self.busy = Busy("process", readers, ssp)  # what the task watchdog looks at
        started = time.perf_counter()
        try:
            journals = self.tasks.journals
            if len(readers) == 1 and not journals:
                dispatch = dispatch_one if readers[0].process_batch is None else dispatch_batch
                await dispatch(readers[0], ssp, records, self.codec, self.policies)
            else:
                await dispatch_many(readers, ssp, records, self.codec, self.policies, journals)
        except UndecodableRecordError as error:
            self.undecodable = self.undecodable or error
            return False
        finally:
            self.busy = None
        self.metrics.batch_done(readers, len(records), time.perf_counter() - started)
        return True

    async def window(self, instances: Sequence[TaskInstance]) -> None:
        """Call every task's ``window``."""
        for instance in instances:
            self.busy = Busy("window", (instance,))
            await instance.window()
        self.busy = None
