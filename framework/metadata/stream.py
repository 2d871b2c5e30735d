"""The coordinator stream: a compacted one-partition stream holding a job's job models.

It is the job's memory across restarts: the latest model gives the SSP → task history
and the task → changelog partition mapping the next model must keep. It also holds the
coordinator's `CoordinatorStatus` and every worker's `WorkerReport`. Coordinator and
workers both use this module, so it lives outside both.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from framework.config import JobConfig
from framework.metadata.jobmodel import JobModel
from framework.metadata.records import (
    CoordinatorStatus,
    HostReport,
    QueryEndpoint,
    WorkerProgress,
    WorkerReport,
)
from framework.systems.base import Consumer, ProducerRecord, Record, System
from framework.systems.reading import read_range
from groupers import SystemStreamPartition

MODEL_KEY = b"job-model"
STATUS_KEY = b"status"
WORKER_PREFIX = b"worker/"
HOST_PREFIX = b"host/"
PROGRESS_PREFIX = b"progress/"
QUERIES_PREFIX = b"queries/"
STANDBY_QUERIES_PREFIX = b"queries-standby/"
"""Key prefix of a host's standby-read endpoint (not ``queries/``: a reader of an older
version, which parses ``queries/<worker id>``, ignores it)."""


@dataclass
class CoordinatorState:
    """Everything the coordinator stream holds: latest model, job status, worker reports."""

    model: JobModel | None = None
    status: CoordinatorStatus = field(default_factory=CoordinatorStatus)
    workers: dict[int, WorkerReport] = field(default_factory=dict)
    hosts: dict[str, HostReport] = field(default_factory=dict)
    progress: dict[int, WorkerProgress] = field(default_factory=dict)
    """Worker → its live facts (metrics port, restores in progress)."""
    queries: dict[int, QueryEndpoint] = field(default_factory=dict)
    """Worker → where it answers interactive queries."""
    standby_queries: dict[str, QueryEndpoint] = field(default_factory=dict)
    """Host → where it answers reads of its standby copies (``max_lag``)."""


def _coordinator_ssp(config: JobConfig) -> SystemStreamPartition:
    system, stream = config.coordinator_ref
    return SystemStreamPartition(system, stream, 0)


async def ensure_coordinator_stream(system: System, config: JobConfig) -> None:
    """Create the coordinator stream (1 partition, compacted) if it is missing."""
    ssp = _coordinator_ssp(config)
    await system.create_stream(ssp.stream, 1, compacted=True, exist_ok=True)


async def publish_model(system: System, config: JobConfig, model: JobModel, *,
                        fenced: bool = False, previous: JobModel | None = None,
                        in_place: bool = False, gone: Collection[int] = ()) -> JobModel:
    """Make ``model``'s epoch current (fencing every older worker out), then write it to the
    coordinator stream; returns the model as published.

    Epochs strictly increase: when the fence is already at or past the model's epoch (a
    coordinator died between fencing and writing its model), the model takes the next epoch.
    ``fenced``: the caller already fenced at ``model.epoch`` (`sampan rekey` does, before its
    long re-key, so that no old worker commits meanwhile). ``in_place``: the running
    workers of ``previous`` (the caller's last model) may take it without restarting
    (`JobModel.in_place_since`; their producers are not fenced, but those of the workers
    ``gone`` from the model are). When the fence moved
    past ``previous`` meanwhile (another coordinator), it is published for a restart.
    """
    ssp = _coordinator_ssp(config)
    await ensure_coordinator_stream(system, config)
    if not fenced:
        current = await system.fenced_epoch(config.name)
        in_place = in_place and previous is not None and current == previous.epoch
        if current is not None and current >= model.epoch:
            model = replace(model, epoch=current + 1)
        if in_place and previous is not None:
            model = replace(model, in_place_since=previous.in_place_since or previous.epoch)
        await system.advance_fence(config.name, model.epoch, in_place=in_place, gone=gone)
    await system.produce([ProducerRecord(ssp.stream, MODEL_KEY, model.to_bytes(), partition=0)])
    return model


async def publish_status(system: System, config: JobConfig, status: CoordinatorStatus) -> None:
    """Write the coordinator's status to the coordinator stream."""
    await _publish_report(system, config, STATUS_KEY, status.to_dict())


async def publish_worker_report(system: System, config: JobConfig, worker: int,
                                report: WorkerReport) -> None:
    """Write worker ``worker``'s report to the coordinator stream."""
    await _publish_report(system, config, WORKER_PREFIX + str(worker).encode(),
                          report.to_dict())


async def publish_host_report(system: System, config: JobConfig, report: HostReport) -> None:
    """Write host ``report.host``'s report to the coordinator stream."""
    await _publish_report(system, config, HOST_PREFIX + report.host.encode(), report.to_dict())


async def publish_worker_progress(system: System, config: JobConfig, worker: int,
                                  progress: WorkerProgress) -> None:
    """Write worker ``worker``'s live facts (metrics port, restore progress)."""
    await _publish_report(system, config, PROGRESS_PREFIX + str(worker).encode(),
                          progress.to_dict())


async def publish_standby_endpoint(system: System, config: JobConfig, host: str,
                                   endpoint: QueryEndpoint) -> None:
    """Write where host ``host`` answers standby reads (``url`` None: it stopped)."""
    await _publish_report(system, config, STANDBY_QUERIES_PREFIX + host.encode(),
                          endpoint.to_dict())


async def publish_query_endpoint(system: System, config: JobConfig, worker: int,
                                 endpoint: QueryEndpoint) -> None:
    """Write where worker ``worker`` answers queries (``url`` None: it stopped)."""
    await _publish_report(system, config, QUERIES_PREFIX + str(worker).encode(),
                          endpoint.to_dict())


async def _publish_report(
    system: System, config: JobConfig, key: bytes, report: dict[str, Any]
) -> None:
    ssp = _coordinator_ssp(config)
    await ensure_coordinator_stream(system, config)
    value = json.dumps(report, sort_keys=True).encode()
    await system.produce([ProducerRecord(ssp.stream, key, value, partition=0)])


async def read_state(system: System, config: JobConfig) -> CoordinatorState:
    """Replay the coordinator stream: the latest value of every key wins (a one-shot read;
    a long-lived reader follows it with `CoordinatorReader`)."""
    ssp = _coordinator_ssp(config)
    if ssp.stream not in await system.list_streams():
        return CoordinatorState()
    offsets = (await system.offsets(ssp.stream))[0]
    latest: dict[bytes, bytes] = {}
    async for batch in read_range(system, ssp, offsets.oldest, offsets.end):
        _apply(latest, batch)
    return _decode(latest)


async def first_state(system: System, config: JobConfig,
                      wanted: Callable[[CoordinatorState], bool]) -> CoordinatorState | None:
    """Replay the coordinator stream record by record: the first state (the latest value
    of every key up to a record) for which ``wanted`` holds, or None. For a check about one
    moment — the reports once a failover settled — that must not depend on how soon its
    reader looked: by then a later model may have replaced what it wants to see."""
    ssp = _coordinator_ssp(config)
    if ssp.stream not in await system.list_streams():
        return None
    offsets = (await system.offsets(ssp.stream))[0]
    state = CoordinatorState()
    async for batch in read_range(system, ssp, offsets.oldest, offsets.end):
        for record in batch:
            if record.key is not None and record.value is not None:
                _decode_into(state, record.key, record.value)
                if wanted(state):
                    return state
    return None


def _apply(latest: dict[bytes, bytes], batch: Sequence[Record]) -> None:
    for record in batch:
        if record.key is not None and record.value is not None:
            latest[record.key] = record.value


def _decode(latest: Mapping[bytes, bytes], model: JobModel | None = None) -> CoordinatorState:
    """The state of the coordinator stream's latest values (fresh objects: callers may
    change them); ``model``: ``latest``'s model already decoded."""
    state = CoordinatorState()
    if model is not None:
        state.model = model
    for key, value in latest.items():
        if key != MODEL_KEY or model is None:
            _decode_into(state, key, value)
    return state


def _decode_into(state: CoordinatorState, key: bytes, value: bytes) -> None:
    """Set the part of ``state`` that key ``key`` of the stream holds to ``value``."""
    if key == MODEL_KEY:
        state.model = JobModel.from_bytes(value)
    elif key == STATUS_KEY:
        state.status = CoordinatorStatus.from_dict(json.loads(value))
    elif key.startswith(WORKER_PREFIX):
        state.workers[int(key[len(WORKER_PREFIX):])] = WorkerReport.from_dict(json.loads(value))
    elif key.startswith(HOST_PREFIX):
        state.hosts[key[len(HOST_PREFIX):].decode()] = HostReport.from_dict(json.loads(value))
    elif key.startswith(QUERIES_PREFIX):
        state.queries[int(key[len(QUERIES_PREFIX):])] = QueryEndpoint.from_dict(
            json.loads(value))
    elif key.startswith(STANDBY_QUERIES_PREFIX):
        state.standby_queries[key[len(STANDBY_QUERIES_PREFIX):].decode()] = (
            QueryEndpoint.from_dict(json.loads(value)))
    elif key.startswith(PROGRESS_PREFIX):
        state.progress[int(key[len(PROGRESS_PREFIX):])] = WorkerProgress.from_dict(
            json.loads(value))


class CoordinatorReader:
    """Follows a job's coordinator stream for a long-lived reader (a worker, a host): each
    `read` fetches only what was written since the last one, on one consumer kept open,
    where `read_state` replays the whole stream on a new consumer (a worker taking a newer
    model in place holds its tasks while it reads). `close` when done."""

    def __init__(self, system: System, config: JobConfig) -> None:
        self.system = system
        self._ssp = _coordinator_ssp(config)
        self._consumer: Consumer | None = None
        self._next = 0
        self._latest: dict[bytes, bytes] = {}
        self._model: tuple[bytes, JobModel] | None = None
        self._lock = asyncio.Lock()

    async def read(self) -> CoordinatorState:
        """Everything the coordinator stream holds now (what `read_state` returns)."""
        async with self._lock:
            await self._catch_up()
            return _decode(self._latest, self._latest_model())

    async def latest_model(self) -> JobModel | None:
        """The newest job model in the coordinator stream, or None if there is none yet."""
        async with self._lock:
            await self._catch_up()
            return self._latest_model()

    async def close(self) -> None:
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            await consumer.close()

    def _latest_model(self) -> JobModel | None:
        raw = self._latest.get(MODEL_KEY)
        if raw is None:
            return None
        if self._model is None or self._model[0] is not raw:  # models are frozen: kept
            self._model = (raw, JobModel.from_bytes(raw))
        return self._model[1]

    async def _catch_up(self) -> None:
        system, ssp = self.system, self._ssp
        if self._consumer is None and ssp.stream not in await system.list_streams():
            return
        current = (await system.offsets(ssp.stream)).get(ssp.partition)
        if current is None:
            return
        if current.end < self._next:  # deleted and created again: replay the new one
            self._next, self._latest, self._model = 0, {}, None
        start = max(self._next, current.oldest)
        if start >= current.end:
            return
        if self._consumer is None:
            self._consumer = system.consumer()
        async for batch in read_range(system, ssp, start, current.end,
                                      consumer=self._consumer):
            _apply(self._latest, batch)
            if batch:
                self._next = batch[-1].offset + 1
        self._next = max(self._next, current.end)


async def read_latest_model(system: System, config: JobConfig) -> JobModel | None:
    """The newest job model in the coordinator stream, or None if there is none yet."""
    return (await read_state(system, config)).model
