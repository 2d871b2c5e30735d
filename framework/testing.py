"""Run a `StreamTask` or a pipeline over in-memory input in a unit test: no broker, no disk.

`run_task` feeds records to one instance of the task the way a worker does: the same
`TaskInstance`, buffered `TaskStore`s over in-memory engines, and the worker's real
`Committer` writing outputs, changelog records and checkpoints atomically to an in-memory
system (`framework.systems.memory`). It returns what the task committed and what its
stores hold afterwards. ``crash_after=N`` kills the task after N records, uncommitted
work and all, then restarts it as a worker would: stores restored from their changelogs,
inputs replayed from the last checkpoint — so a test can check that the committed
results do not depend on a crash (they do when a task keeps state outside its stores).

    >>> from framework import StreamTask
    >>> class SumTask(StreamTask):
    ...     def init(self, context):
    ...         self.totals = context.store("totals")
    ...     def process(self, envelope, collector, coordinator):
    ...         total = (self.totals.get(envelope.key) or 0) + envelope.value["amount"]
    ...         self.totals.put(envelope.key, total)
    ...         collector.send("local.totals", key=envelope.key, value=total)
    >>> result = run_task(SumTask, [("local.events", "a", {"amount": 2}),
    ...                             ("local.events", "b", {"amount": 5}),
    ...                             ("local.events", "a", {"amount": 3})],
    ...                   stores={"totals": {"b": 10}})
    >>> [(m.stream, m.key, m.value) for m in result.outputs]
    [('local.totals', 'a', 2), ('local.totals', 'b', 15), ('local.totals', 'a', 5)]
    >>> result.stores
    {'totals': {'a': 5, 'b': 15}}
    >>> result.last_values("local.totals")
    {'a': 5, 'b': 15}

`run_pipeline` runs a pipeline (`framework.pipelines`) the same way, in one task, stage by
stage: the records its stages write to intermediate streams are read back, through the
streams' serdes, by the stages after them.

    >>> from framework.pipelines import Pipeline
    >>> p = Pipeline()
    >>> (p.source("local.views")
    ...   .partition_by(lambda user, view: view["page"], name="by-page")
    ...   .count(store="views")
    ...   .to("local.views-per-page"))
    >>> result = run_pipeline(p, [("local.views", "u1", {"page": "home"}),
    ...                           ("local.views", "u2", {"page": "faq"}),
    ...                           ("local.views", "u2", {"page": "home"})])
    >>> [(m.key, m.value) for m in result.sent_to("local.views-per-page")]
    [('home', 1), ('faq', 1), ('home', 2)]
    >>> result.stores
    {'views': {'faq': 1, 'home': 2}}
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from framework.api import Envelope, OutgoingMessage, StreamTask
from framework.config import JobConfig, StreamRef, load_config, parse_config
from framework.config.pipeline import PIPELINE_TASK, JobFacts
from framework.config.serdes import Serde, get_serde
from framework.pipelines import Pipeline
from framework.pipelines.task import Compiled, PipelineTask, compiled_for
from framework.stores import MemoryEngine, TaskStore
from framework.stores.restore import changelog_reader, restore_store
from framework.systems.base import ProducerRecord, Record
from framework.systems.memory import MemorySystem
from framework.worker.codec import RecordCodec, Sent
from framework.worker.commit import Committer
from framework.worker.instance import TaskInstance
from groupers import SystemStreamPartition

__all__ = ["InputRecord", "TaskRunResult", "run_pipeline", "run_pipeline_async", "run_task",
           "run_task_async"]

TASK_NAME = "Partition 0"
"""The name the task instance gets (what ``context.task_name`` returns)."""

InputRecord = Envelope | tuple[Any, ...]
"""An `Envelope`, or ``(stream, key, value)`` / ``(stream, key, value, partition)`` /
``(stream, key, value, partition, timestamp)`` with ``stream`` written
``"system.stream"`` (partition None: 0; timestamp: 0 unless given)."""


@dataclass
class TaskRunResult:
    """What a task did: its outputs in send order and its stores' final contents."""

    outputs: list[OutgoingMessage] = field(default_factory=list)
    """Every record the task sent (`process` and `window`), in order."""
    stores: dict[str, dict[Any, Any]] = field(default_factory=dict)
    """Store name → {key: value} after the run, committed like a worker would."""
    processed: int = 0
    """`process` calls (fewer than the inputs if the task asked to shut down; more after
    a crash, which replays what was not committed)."""
    commits: int = 0
    """Commits: requested by the task, forced by a full write buffer, and the final one."""
    shutdown_requested: bool = False
    """True when the task called ``coordinator.shutdown()``; later inputs were not fed."""
    crashed_after: int | None = None
    """With ``crash_after``: records processed before the crash (their uncommitted part
    was processed again after the restart, so ``processed`` counts it twice)."""

    def sent_to(self, stream: str) -> list[OutgoingMessage]:
        """The outputs sent to ``stream``, in order."""
        return [message for message in self.outputs if message.stream == stream]

    def last_values(self, stream: str) -> dict[Any, Any]:
        """The last value sent per key to ``stream`` (what a compacted reader would keep)."""
        return {message.key: message.value for message in self.sent_to(stream)}


def _job_config(config: JobConfig | str | os.PathLike[str] | None, streams: Iterable[str],
                stores: Mapping[str, Any]) -> tuple[JobConfig, bool]:
    """The given job config, or a stand-in declaring the inputs and stores (lenient=True)."""
    if isinstance(config, JobConfig):
        return config, False
    if config is not None:
        return load_config(config), False
    names = sorted(set(streams)) or ["local.input"]
    systems = sorted({StreamRef.parse(name).system for name in names})
    document = {
        "job": {"name": "test", "task": "framework.testing:StreamTask", "inputs": names},
        "systems": {system: {"type": "local"} for system in systems},
        "streams": {name: {} for name in names},
        "stores": {name: {"type": "memory"} for name in stores},
    }
    return parse_config(document, Path.cwd() / "test-job.toml"), True


class _TestInstance(TaskInstance):
    """A `TaskInstance` that accepts sends to streams a stand-in config does not declare,
    and hands what its commits made durable to the run's result."""

    lenient = False
    durable: list[OutgoingMessage]

    def send(self, stream: str, key: Any = None, value: Any = None, *,
             partition: int | None = None, timestamp: int | None = None,
             headers: Mapping[str, bytes] | None = None) -> None:
        if not self.lenient:
            super().send(stream, key, value, partition=partition, timestamp=timestamp,
                         headers=headers)
            return
        self.outputs.append((stream, key, value, partition, timestamp, headers))

    def take_outputs(self) -> tuple[list[Sent], list[tuple[str, ProducerRecord]]]:
        sent, raw = super().take_outputs()
        self._taken = [OutgoingMessage(*one) for one in sent]
        return sent, raw

    def committed(self) -> None:
        super().committed()
        self.durable.extend(self._taken)
        self._taken = []


class _AnySerde:
    """Bytes for any object (its repr), for sends to streams no job file declares: the
    test reads the objects sent, never these bytes."""

    name = "any (framework.testing)"

    def to_bytes(self, obj: Any) -> bytes:
        return repr(obj).encode()

    def from_bytes(self, data: bytes) -> Any:
        return data


class _LenientCodec(RecordCodec):
    """Encodes sends to undeclared streams with `_AnySerde` (a stand-in job declares none)."""

    def _target(self, qualified: str) -> tuple[str, str, Serde, Serde]:
        if qualified in self._config.streams:
            return super()._target(qualified)
        ref = StreamRef.parse(qualified)
        return ref.system, ref.stream, _AnySerde(), _AnySerde()


class _Systems(dict[str, MemorySystem]):
    """One in-memory system per name, made on first use (outputs may name any system)."""

    def __missing__(self, name: str) -> MemorySystem:
        system = self[name] = MemorySystem(name, auto_create=True)
        return system


def _envelope(item: InputRecord, offsets: dict[SystemStreamPartition, int],
              codec: RecordCodec | None) -> Envelope:
    """``item`` as an envelope with the next offset of its SSP; through the serdes if any."""
    if isinstance(item, Envelope):
        offsets[item.ssp] = item.offset + 1
        return item
    stream, key, value, *rest = item
    system, name = StreamRef.parse(stream)
    ssp = SystemStreamPartition(system, name, int(rest[0]) if rest and rest[0] is not None
                                else 0)
    timestamp = int(rest[1]) if len(rest) > 1 else 0
    offset = offsets.get(ssp, 0)
    offsets[ssp] = offset + 1
    if codec is None:
        return Envelope(ssp, offset, key, value, timestamp, {})
    key_serde, value_serde = codec.serdes(stream)
    record = Record(ssp.partition, offset, None if key is None else key_serde.to_bytes(key),
                    None if value is None else value_serde.to_bytes(value), timestamp)
    return codec.decode(ssp, record)  # what the task would see in production


async def run_task_async(
    task: type[StreamTask] | StreamTask,
    inputs: Iterable[InputRecord],
    *,
    stores: Mapping[str, Mapping[Any, Any] | None] | None = None,
    config: JobConfig | str | os.PathLike[str] | None = None,
    windows: int = 0,
    write_buffer_max_keys: int | None = None,
    crash_after: int | None = None,
) -> TaskRunResult:
    """`run_task` for code already inside an event loop."""
    if crash_after is not None and not isinstance(task, type):
        raise TypeError("crash_after needs the task class, not an instance: the restart "
                        "after the crash starts from a new object, as a restarted worker does")
    items = list(inputs)
    stores = dict(stores or {})
    streams = [f"{i.ssp.system}.{i.ssp.stream}" if isinstance(i, Envelope) else str(i[0])
               for i in items]
    job, lenient = _job_config(config, streams, stores)
    if not lenient:
        stores = {name: stores.get(name) for name in sorted({*job.stores, *stores})}
    offsets: dict[SystemStreamPartition, int] = {}
    envelopes = [_envelope(item, offsets, None if lenient else RecordCodec(job))
                 for item in items]
    run = _Run(job, lenient, stores, frozenset(offsets),
               write_buffer_max_keys or job.write_buffer_max_keys)
    await run.preload()
    result = TaskRunResult()
    if crash_after is not None:
        instance = await run.start(task)
        for envelope in envelopes[:crash_after]:
            if instance.shutdown_requested:
                break
            await run.process(instance, envelope)
        result.processed += instance.processed
        result.crashed_after = instance.processed  # uncommitted work dies with it
    instance = await run.start(task)
    resumed = dict(instance.positions)
    for envelope in envelopes:
        if envelope.offset < resumed.get(envelope.ssp, 0):
            continue  # committed before the crash
        if instance.shutdown_requested:
            break
        await run.process(instance, envelope)
    for _ in range(windows):
        if instance.shutdown_requested:
            break
        await instance.window()
    await run.commit(instance)
    await instance.close()
    result.outputs = run.durable
    result.commits = run.committer_commits
    result.processed += instance.processed
    result.shutdown_requested = instance.shutdown_requested
    result.stores = {name: dict(store.all()) for name, store in instance.stores.items()
                     if isinstance(store, TaskStore)}
    return result


class _Run:
    """A task's life over in-memory systems: start (restore), process, commit, crash."""

    def __init__(self, job: JobConfig, lenient: bool,
                 contents: Mapping[str, Mapping[Any, Any] | None],
                 ssps: frozenset[SystemStreamPartition], max_keys: int) -> None:
        self.job, self.lenient, self.contents = job, lenient, contents
        self.ssps, self.max_keys = ssps, max_keys
        self.systems = _Systems()
        self.meta = self.systems[job.metadata_system]
        self.codec = _LenientCodec(job) if lenient else RecordCodec(job)
        self.durable: list[OutgoingMessage] = []
        self.committer_commits = 0
        self.committer: Committer | None = None

    def _changelog(self, store: str) -> str | None:
        """The store's changelog stream in the metadata system (None: not logged)."""
        return self.job.changelog_ref(store).stream if store in self.job.logged_stores else None

    async def preload(self) -> None:
        """Initial store contents, as committed state: logged in the changelog."""
        for name, contents in self.contents.items():
            stream = self._changelog(name)
            if not contents or stream is None:
                continue
            store = self._store(name)
            for key, value in contents.items():
                store.put(key, value)
            await self.meta.produce([ProducerRecord(stream, k, v, partition=0)
                                     for k, v in store.drain().items()])

    def _store(self, name: str) -> TaskStore:
        spec = self.job.store(name) if name in self.job.stores else None
        root = self.job.root
        return TaskStore(name, MemoryEngine(),
                         get_serde(spec.key_serde if spec else "string", search_path=root),
                         get_serde(spec.value_serde if spec else "json", search_path=root),
                         self.max_keys, task=TASK_NAME)

    async def start(self, task: type[StreamTask] | StreamTask) -> _TestInstance:
        """A new instance: stores restored from their changelogs up to the last
        checkpoint, inputs from its positions — what a (re)started worker does."""
        checkpoint = (await self.meta.read_checkpoints(self.job.name)).get(TASK_NAME)
        stores: dict[str, TaskStore] = {}
        positions: dict[tuple[str, str], int] = {}
        for name, contents in self.contents.items():
            store = stores[name] = self._store(name)
            stream = self._changelog(name)
            if stream is None:
                for key, value in (contents or {}).items():  # unlogged: as given, each start
                    store.put(key, value)
                store.apply(store.drain(), None)
                continue
            await self.meta.create_stream(stream, 1, compacted=True, exist_ok=True)
            end = (checkpoint.changelogs.get(name, 0) if checkpoint
                   else (await self.meta.offsets(stream))[0].end)
            ssp = SystemStreamPartition(self.meta.name, stream, 0)
            await restore_store(store.engine, changelog=(stream, 0),
                                fetch=changelog_reader(self.meta, ssp, end), end=end,
                                oldest=0, progress=None, label=f"{TASK_NAME}/{name}")
            positions[(TASK_NAME, name)] = end
        instance = _TestInstance(TASK_NAME, task() if isinstance(task, type) else task,
                                 self.ssps, stores, self.job,
                                 positions=checkpoint.inputs if checkpoint else None)
        instance.lenient = self.lenient
        instance.durable = self.durable
        self.committer = Committer(self.job, self.systems, self.codec, 1, {TASK_NAME: 0},
                                   positions)
        await instance.init()
        return instance

    async def process(self, instance: _TestInstance, envelope: Envelope) -> None:
        await instance.process(envelope)
        if instance.commit_requested or instance.buffers_full():
            await self.commit(instance)

    async def commit(self, instance: _TestInstance) -> None:
        assert self.committer is not None
        await self.committer.commit([instance])
        self.committer_commits += 1


def run_task(
    task: type[StreamTask] | StreamTask,
    inputs: Iterable[InputRecord],
    *,
    stores: Mapping[str, Mapping[Any, Any] | None] | None = None,
    config: JobConfig | str | os.PathLike[str] | None = None,
    windows: int = 0,
    write_buffer_max_keys: int | None = None,
    crash_after: int | None = None,
) -> TaskRunResult:
    """Run ``task`` (a class or an instance) over ``inputs`` and return what it did.

    ``stores`` names the stores the task opens, with optional initial contents. Without
    ``config`` they use the default serdes (string keys, JSON values) and any output
    stream is accepted. With ``config`` (a `JobConfig` or a job file path) every declared
    store exists (all in memory), inputs and outputs pass through the streams' serdes as
    in a worker, and sends to undeclared streams fail. ``windows`` calls `window` that
    many times after the inputs. The task commits when it asks, when a write buffer
    fills, and at the end, through the worker's own `Committer`; `outputs` holds only
    what commits made durable.

    ``crash_after=N`` (``task`` must be a class) processes N records, then drops the task
    with everything it did not commit and starts a new one: stores restored from their
    changelogs up to the last checkpoint, inputs replayed from its positions. A task whose
    results live in its stores commits the same outputs and state with or without it.
    """
    return asyncio.run(run_task_async(task, inputs, stores=stores, config=config,
                                      windows=windows,
                                      write_buffer_max_keys=write_buffer_max_keys,
                                      crash_after=crash_after))



PipelineSource = Pipeline | Callable[[], Pipeline] | JobConfig | str | os.PathLike[str]
"""What `run_pipeline` runs: a `Pipeline`, the function building one, or a pipeline job
(its `JobConfig` or job file)."""


class _Crash(Exception):
    """``crash_after`` records were processed: the task dies here."""


def _pipeline_job(source: PipelineSource) -> tuple[JobConfig, Compiled]:
    """The job and compiled pipeline ``source`` gives; a stand-in job declaring every
    stream the pipeline names (one partition each, on local systems; a name without its
    system on ``local``) for a bare one."""
    if isinstance(source, JobConfig | str | os.PathLike):
        config = source if isinstance(source, JobConfig) else load_config(source)
        return config, compiled_for(config)
    pipeline = source if isinstance(source, Pipeline) else source()
    named = sorted({str(value) if "." in str(value) else f"local.{value}"
                    for node in pipeline.nodes for key, value in node.args.items()
                    if key in ("stream", "late_stream") and value})
    document: dict[str, Any] = {
        "job": {"name": "test", "task": PIPELINE_TASK},
        "systems": {StreamRef.parse(n).system: {"type": "local"} for n in named},
        "streams": {name: {"partitions": 1} for name in named}, "stores": {}}
    tables = pipeline.job_tables(JobFacts.of_document(document))
    document["job"].update(inputs=list(tables.inputs),
                           broadcast_inputs=list(tables.broadcast_inputs))
    document["streams"].update({n: dict(t) for n, t in tables.streams.items()})
    document["stores"].update({n: dict(t) for n, t in tables.stores.items()})
    config = parse_config(document, Path.cwd() / "test-job.toml")
    return config, Compiled.of(pipeline, config, "test")


async def run_pipeline_async(
    source: PipelineSource,
    inputs: Iterable[InputRecord],
    *,
    stores: Mapping[str, Mapping[Any, Any] | None] | None = None,
    windows: int = 0,
    write_buffer_max_keys: int | None = None,
    crash_after: int | None = None,
) -> TaskRunResult:
    """`run_pipeline` for code already inside an event loop."""
    config, compiled = _pipeline_job(source)
    task = PipelineTask.bound(compiled)
    codec = RecordCodec(config)
    offsets: dict[SystemStreamPartition, int] = {}
    envelopes = [_envelope(item, offsets, codec) for item in inputs]
    intermediate = [SystemStreamPartition(*StreamRef.parse(name), 0)
                    for name in compiled.plan.intermediate]
    contents = {name: (stores or {}).get(name) for name in sorted({*config.stores,
                                                                   *(stores or {})})}
    run = _Run(config, False, contents, frozenset(offsets) | frozenset(intermediate),
               write_buffer_max_keys or config.write_buffer_max_keys)
    for ssp in intermediate:
        await run.systems[ssp.system].create_stream(ssp.stream, 1, exist_ok=True)
    await run.preload()
    result = TaskRunResult()
    left = crash_after

    async def feed(instance: _TestInstance) -> None:
        """Every record not processed yet: the inputs, then the intermediate streams'
        records, stage by stage, until none is left; a commit after each round."""
        nonlocal left
        batch = [e for e in envelopes if e.offset >= instance.positions.get(e.ssp, 0)]
        while True:
            batch = batch or [codec.decode(ssp, record) for ssp in intermediate
                              for record in run.systems[ssp.system].records(
                                  ssp.stream, 0, instance.positions.get(ssp, 0))]
            if not batch:
                return
            for envelope in batch:
                if left is not None and left <= 0:
                    raise _Crash
                await run.process(instance, envelope)
                left = None if left is None else left - 1
            await run.commit(instance)
            batch = []

    instance = await run.start(task)
    try:
        await feed(instance)
    except _Crash:
        result.processed += instance.processed
        result.crashed_after = instance.processed  # what it did not commit dies with it
        left = None
        instance = await run.start(task)
        await feed(instance)
    for _ in range(windows):
        await instance.window()
        await run.commit(instance)
        await feed(instance)  # what the ticks sent on through intermediate streams
    await run.commit(instance)
    await instance.close()
    result.outputs = run.durable
    result.commits = run.committer_commits
    result.processed += instance.processed
    result.stores = {name: dict(store.all()) for name, store in instance.stores.items()
                     if isinstance(store, TaskStore)}
    return result


def run_pipeline(
    source: PipelineSource,
    inputs: Iterable[InputRecord],
    *,
    stores: Mapping[str, Mapping[Any, Any] | None] | None = None,
    windows: int = 0,
    write_buffer_max_keys: int | None = None,
    crash_after: int | None = None,
) -> TaskRunResult:
    """Run a pipeline over ``inputs`` as its job would, in one task, and return what it
    committed: every record sent (to its output streams and to its intermediate streams,
    in commit order) and its stores' contents.

    ``source`` is a `Pipeline`, the function building one, or a pipeline job (a
    `JobConfig` or a job file naming ``pipeline``). A bare pipeline runs in a stand-in job
    declaring every stream it names with default serdes. Records pass through the
    streams' serdes as in a worker, the intermediate streams included: the inputs are
    processed first, in order, then the records their stages wrote to intermediate
    streams, stage by stage, until no stage writes any more — with a commit after each
    round, through the worker's `Committer`. ``windows`` then runs the window ticks
    that many times (windows and joins close on them; custom steps' ``window``).
    ``stores`` gives initial contents; ``crash_after=N`` drops the task after N records
    with what it did not commit, and restarts it from its stores' changelogs and its
    checkpoint, as `run_task` does.
    """
    return asyncio.run(run_pipeline_async(source, inputs, stores=stores, windows=windows,
                                          write_buffer_max_keys=write_buffer_max_keys,
                                          crash_after=crash_after))
