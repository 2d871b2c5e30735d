"""A worker's metrics: figures read from its tasks at scrape time, plus what only the hot
path knows, accumulated once per batch (latency) or per commit (sizes, durations).

The worker calls `attach` once its job model is loaded (serving ``/metrics`` and reporting
its port and restore progress to the coordinator stream), `resumed` when its tasks run
(reading input end offsets for lag every ``lag_interval_ms``), and `close` at the end.
`current` is the metrics of the worker running in this asyncio context, for the commit
and restore code that holds no worker reference.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from enum import Enum
from typing import Any, Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric

from framework.cancel import cancel_and_wait
from framework.config import JobConfig
from framework.errors import SampanError
from framework.logformat import set_context_provider
from framework.metadata import RestoreProgress, WorkerProgress, publish_worker_progress
from framework.metadata.jobmodel import JobModel
from framework.metrics.collect import WeightedHistogram, family, histogram_family
from framework.metrics.families import COMMIT_RECORD_BUCKETS, LATENCY_BUCKETS
from framework.metrics.restore import RestoreTracker
from framework.metrics.server import MetricsServer, serve
from framework.metrics.targets import target_file
from framework.metrics.views import Busy, TaskProgress
from framework.progress import Progress, ProgressFactory
from framework.systems.base import System
from groupers import SystemStreamPartition

__all__ = ["InstanceView", "WorkerMetrics", "WorkerView", "current", "restore_progress"]

log = logging.getLogger(__name__)

_current: contextvars.ContextVar[WorkerMetrics | None] = contextvars.ContextVar(
    "sampan_worker_metrics", default=None)

RATE_WINDOW_S = 10.0
REPORT_INTERVAL_S = 1.0
"""How often a restoring worker writes its restore progress to the coordinator stream."""


def current() -> WorkerMetrics | None:
    """The metrics of the worker running in this asyncio context (None outside a worker)."""
    return _current.get()


def restore_progress(task: str, store: str) -> ProgressFactory:
    """The progress factory of one store's restore: a `Progress` (log lines, bar) whose
    figures also go to the current worker's metrics and restore reports."""
    metrics = _current.get()
    if metrics is None:
        return Progress
    return metrics.restores.factory(task, store)


class InstanceView(TaskProgress, Protocol):
    """What metrics read of one running task (a `TaskInstance`)."""

    @property
    def ssps(self) -> frozenset[SystemStreamPartition]: ...


class WorkerView(Protocol):
    """What metrics read of their worker (a `Worker`), on the scrape thread too: never
    written through, and copied before iterating."""

    @property
    def instances(self) -> Sequence[InstanceView]: ...

    @property
    def model(self) -> JobModel | None: ...

    @property
    def restore_modes(self) -> Mapping[str, str]:
        """``task/store`` → how its store was restored: none, delta or full."""
        ...

    @property
    def merge_waiting(self) -> Mapping[str, int]:
        """Task → records of its new partitions waiting for the old ones (expansions)."""
        ...

    @property
    def busy(self) -> Busy | None: ...

    @property
    def state(self) -> Enum:
        """Its lifecycle state (`framework.worker.states.WorkerState`)."""
        ...

    @property
    def systems(self) -> Mapping[str, System]: ...


class WorkerMetrics:
    """Metrics of one worker process (see `framework.metrics.families`)."""

    def __init__(self, config: JobConfig, worker_id: int) -> None:
        self.config = config
        self.enabled = config.metrics.enabled
        self.labels = (config.name, str(worker_id))
        self.worker_id = worker_id
        self.port: int | None = None
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        self.restores = RestoreTracker()
        self._worker: WorkerView | None = None
        self._epoch: int | None = None
        self._started_ms = 0
        self._server: MetricsServer | None = None
        self._latency: dict[str, WeightedHistogram] = {}
        self._outputs: dict[str, int] = {}
        self._dead_letters: dict[str, int] = {}
        self._changelog: dict[tuple[str, str], int] = {}
        self._commits = 0
        self._commit_seconds = WeightedHistogram((.001, .005, .01, .025, .05, .1, .25, .5, 1,
                                                  2.5, 5, 10))
        self._commit_records = WeightedHistogram(COMMIT_RECORD_BUCKETS)
        self._ends: dict[SystemStreamPartition, int] = {}
        self._samples: deque[tuple[float, dict[str, int]]] = deque()
        self._rates: dict[str, float] = {}
        self._background: asyncio.Task[None] | None = None
        self._restoring = asyncio.Event()

    # -- lifecycle (called by the worker) ----------------------------------------------------
    async def attach(self, worker: WorkerView, epoch: int, started_ms: int) -> None:
        """The worker loaded its model: serve, and report the port and restore progress."""
        _current.set(self)
        self._worker, self._epoch = worker, epoch
        self._started_ms = started_ms
        set_context_provider(self._log_context)
        if self.enabled and self._server is None:
            process = f"worker-{self.worker_id}"
            self._server = serve(self.registry, self.config.metrics.bind,
                                 self.config.metrics.worker_port(self.worker_id),
                                 f"worker {self.worker_id} of job {self.config.name!r}",
                                 target_file(self.config.state_dir, process),
                                 {"sampan_job": self.config.name, "sampan_process": process})
            self.port = self._server.port
        self._restoring.clear()
        self._background = asyncio.create_task(self._report_restores(started_ms))

    @property
    def _attached(self) -> WorkerView:
        if self._worker is None:
            raise SampanError("worker metrics read before `attach`: a bug in the worker")
        return self._worker

    def _log_context(self) -> dict[str, Any]:
        """Live fields of JSON log lines: the job, epoch and the task call in progress."""
        busy = self._worker.busy if self._worker is not None else None
        tasks = [t.name for t in busy.tasks] if busy is not None else []
        return {"job": self.config.name, "epoch": self._epoch,
                "task": ", ".join(tasks) if tasks else None}

    async def new_epoch(self, epoch: int) -> None:
        """The worker took a newer job model in place (no restart): its endpoint now
        serves that epoch, and says so in the coordinator stream."""
        self._epoch = epoch
        await self._publish(WorkerProgress(
            epoch=epoch, pid=os.getpid(), started_ms=self._started_ms,
            updated_ms=int(time.time() * 1000), metrics_port=self.port, restoring=[]))

    async def resumed(self) -> None:
        """The tasks run: stop restore reports (the worker's own report follows), watch lag."""
        await self._stop_background()
        if self.enabled:
            self._samples.append((time.monotonic(), {i.name: i.processed
                                                     for i in self._attached.instances}))
            self._background = asyncio.create_task(self._watch_lag())

    async def close(self) -> None:
        """Stop the background work and the endpoint (its port is free again)."""
        await self._stop_background()
        if self._server is not None:
            self._server.close()
            self._server = None

    async def _stop_background(self) -> None:
        background, self._background = self._background, None
        if background is None:
            return
        if not self._restoring.is_set():  # a restore report loop: let it write its last
            self._restoring.set()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(background), 5)
        await cancel_and_wait(background, "the metrics' lag watcher")  # nothing to finish

    # -- the hot path -------------------------------------------------------------------------
    def batch_done(self, readers: Sequence[Any], records: int, seconds: float) -> None:
        """A fetched batch of ``records`` went through the ``readers`` (task instances)."""
        if not self.enabled or not records or not readers:
            return
        per_record = seconds / (records * len(readers))
        for reader in readers:
            histogram = self._latency.get(reader.name)
            if histogram is None:
                histogram = self._latency[reader.name] = WeightedHistogram(LATENCY_BUCKETS)
            histogram.observe(per_record, records)

    def commit_done(self, seconds: float, records: int, sent: Mapping[str, tuple[int, int]],
                    changelog: Sequence[tuple[str, str, int]]) -> None:
        """A commit of ``records`` records took ``seconds``; ``sent`` is task → (outputs,
        dead letters) it wrote; ``changelog`` is (task, store, records written) per store."""
        if not self.enabled:
            return
        self._commits += 1
        self._commit_seconds.observe(seconds)
        self._commit_records.observe(records)
        for task, (outputs, raw) in sent.items():
            if outputs:
                self._outputs[task] = self._outputs.get(task, 0) + outputs
            if raw:
                self._dead_letters[task] = self._dead_letters.get(task, 0) + raw
        for task, store, written in changelog:
            if written:
                self._changelog[(task, store)] = self._changelog.get((task, store), 0) + written

    # -- background ---------------------------------------------------------------------------
    async def _report_restores(self, started_ms: int) -> None:
        """Write this worker's port at once, then its restore progress every second."""
        last: list[RestoreProgress] | None = None
        stopping = False
        while True:
            progress = self.restores.progress()
            if progress != last:
                last = progress
                await self._publish(WorkerProgress(
                    epoch=self._epoch or 0, pid=os.getpid(), started_ms=started_ms,
                    updated_ms=int(time.time() * 1000), metrics_port=self.port,
                    restoring=progress))
            if stopping:  # the last write above says the restores ended
                return
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._restoring.wait(), REPORT_INTERVAL_S)
                stopping = True

    async def _publish(self, report: WorkerProgress) -> None:
        try:
            await publish_worker_progress(self._attached.systems[self.config.metadata_system],
                                        self.config, self.worker_id, report)
        except SampanError as error:  # a report is for people; it never stops a worker
            log.warning("could not write the restore progress report: %s", error)

    async def _watch_lag(self) -> None:
        interval = self.config.metrics.lag_interval_ms / 1000
        while True:
            try:
                await self._read_ends()
            except SampanError as error:
                log.debug("input end offsets unavailable for lag: %s", error)
            self._sample_rates()
            await asyncio.sleep(interval)

    async def _read_ends(self) -> None:
        streams = sorted({(s.system, s.stream) for i in self._attached.instances for s in i.ssps})
        for system, stream in streams:
            ranges = await self._attached.systems[system].offsets(stream)
            for partition, offsets in ranges.items():
                self._ends[SystemStreamPartition(system, stream, partition)] = offsets.end

    def _sample_rates(self) -> None:
        now = time.monotonic()
        self._samples.append((now, {i.name: i.processed for i in self._attached.instances}))
        while len(self._samples) > 2 and self._samples[1][0] <= now - RATE_WINDOW_S:
            self._samples.popleft()
        (first, before), (last, after) = self._samples[0], self._samples[-1]
        if last - first >= 0.5:
            self._rates = {t: (n - before.get(t, 0)) / (last - first) for t, n in after.items()}

    # -- scrape (on the server's thread: read, copy, never block) -----------------------------
    def collect(self) -> Iterator[Metric]:
        labels = self.labels
        worker = self._worker
        instances = list(worker.instances) if worker is not None else []
        model = worker.model if worker is not None else None
        processed, skipped = family("sampan_records_processed"), family("sampan_records_skipped")
        lag, held = family("sampan_input_lag_records"), family("sampan_barrier_held_ssps")
        merging = family("sampan_expansion_merge_waiting_records")
        waiting = dict(worker.merge_waiting) if worker is not None else {}
        ends = dict(self._ends)
        for instance in instances:
            processed.add_metric([*labels, instance.name], instance.processed)
            skipped.add_metric([*labels, instance.name], instance.skipped)
            positions = dict(instance.positions)
            for ssp in sorted(instance.ssps):
                if ssp in ends:
                    lag.add_metric([*labels, instance.name, f"{ssp.system}.{ssp.stream}",
                                    str(ssp.partition)],
                                   max(0, ends[ssp] - positions.get(ssp, 0)))
            task_model = model.tasks.get(instance.name) if model is not None else None
            held.add_metric([*labels, instance.name],
                            len(task_model.held_behind_barrier(positions))
                            if task_model is not None else 0)
            merging.add_metric([*labels, instance.name], waiting.get(instance.name, 0))
        yield from (processed, skipped, lag, held, merging)
        yield from self._per_task("sampan_task_records_per_second", self._rates)
        yield from self._per_task("sampan_outputs_produced", self._outputs)
        yield from self._per_task("sampan_records_dead_lettered", self._dead_letters)
        latency = histogram_family("sampan_process_latency_seconds")
        for task, histogram in sorted(self._latency.items()):
            latency.add_metric([*labels, task], histogram.buckets(), histogram.sum)
        changelog = family("sampan_changelog_records_written")
        for (task, store), written in sorted(self._changelog.items()):
            changelog.add_metric([*labels, task, store], written)
        commits = family("sampan_commits")
        commits.add_metric(list(labels), self._commits)
        seconds = histogram_family("sampan_commit_duration_seconds")
        size = histogram_family("sampan_commit_records")
        seconds.add_metric(list(labels), self._commit_seconds.buckets(), self._commit_seconds.sum)
        size.add_metric(list(labels), self._commit_records.buckets(), self._commit_records.sum)
        yield from (latency, changelog, commits, seconds, size)
        yield from self._restore_families(worker)
        if worker is not None:
            now = worker.state
            state = family("sampan_worker_state")
            for each in type(now):  # every state, 1 for the current one: alerts see 0 → 1
                state.add_metric([*labels, each.name], float(each is now))
            yield state
        epoch = family("sampan_job_model_epoch")
        if self._epoch is not None:
            epoch.add_metric([self.config.name, f"worker-{self.worker_id}"], self._epoch)
        yield epoch

    def _per_task(self, name: str, values: dict[str, Any]) -> Iterator[Metric]:
        metric = family(name)
        for task, value in sorted(dict(values).items()):
            metric.add_metric([*self.labels, task], value)
        yield metric

    def _restore_families(self, worker: WorkerView | None) -> Iterator[Metric]:
        restored = family("sampan_store_restore_records_restored")
        to_restore = family("sampan_store_restore_records_to_restore")
        total = 0
        for (task, store), figures in sorted(self.restores.all().items()):
            restored.add_metric([*self.labels, task, store], figures.done)
            to_restore.add_metric([*self.labels, task, store], figures.total)
            total += figures.done
        mode = family("sampan_store_restore_mode")
        modes = dict(worker.restore_modes) if worker is not None else {}
        for name, kind in sorted(modes.items()):
            task, _, store = name.rpartition("/")
            for each in ("none", "delta", "full"):
                mode.add_metric([*self.labels, task, store, each], float(each == kind))
        counter = family("sampan_changelog_records_restored")
        counter.add_metric(list(self.labels), total)
        yield from (restored, to_restore, mode, counter)

