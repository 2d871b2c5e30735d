"""Run a `StreamTask` over in-memory input in a unit test: no broker, no disk.

`run_task` feeds records to one instance of the task, the way a worker would (same
`TaskInstance`, same buffered `TaskStore` over in-memory engines, same serdes when a
job file is given), and returns what it sent and what its stores hold afterwards.

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
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from framework.api import Envelope, OutgoingMessage, StreamTask
from framework.config import JobConfig, StreamRef, load_config, parse_config
from framework.serdes import get_serde
from framework.stores import MemoryEngine, TaskStore
from framework.systems.base import Record
from framework.worker.codec import RecordCodec
from framework.worker.instance import TaskInstance
from groupers import SystemStreamPartition

__all__ = ["InputRecord", "TaskRunResult", "run_task", "run_task_async"]

TASK_NAME = "Partition 0"
"""The name the task instance gets (what ``context.task_name`` returns)."""

InputRecord = Envelope | tuple[Any, ...]
"""An `Envelope`, or ``(stream, key, value)`` / ``(stream, key, value, partition)`` with
``stream`` written ``"system.stream"``."""


@dataclass
class TaskRunResult:
    """What a task did: its outputs in send order and its stores' final contents."""

    outputs: list[OutgoingMessage] = field(default_factory=list)
    """Every record the task sent (`process` and `window`), in order."""
    stores: dict[str, dict[Any, Any]] = field(default_factory=dict)
    """Store name → {key: value} after the run, committed like a worker would."""
    processed: int = 0
    """Input records processed (fewer than given if the task asked to shut down)."""
    commits: int = 0
    """Commits: requested by the task, forced by a full write buffer, and the final one."""
    shutdown_requested: bool = False
    """True when the task called ``coordinator.shutdown()``; later inputs were not fed."""

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
    """A `TaskInstance` that accepts sends to streams a stand-in config does not declare."""

    lenient = False

    def send(self, stream: str, key: Any = None, value: Any = None, *,
             partition: int | None = None, timestamp: int | None = None,
             headers: Mapping[str, bytes] | None = None) -> None:
        if not self.lenient:
            super().send(stream, key, value, partition=partition, timestamp=timestamp,
                         headers=headers)
            return
        self.outputs.append((stream, key, value, partition, timestamp, headers))


def _envelope(item: InputRecord, offsets: dict[SystemStreamPartition, int],
              codec: RecordCodec | None) -> Envelope:
    """``item`` as an envelope with the next offset of its SSP; through the serdes if any."""
    if isinstance(item, Envelope):
        offsets[item.ssp] = item.offset + 1
        return item
    stream, key, value, *rest = item
    system, name = StreamRef.parse(stream)
    ssp = SystemStreamPartition(system, name, int(rest[0]) if rest else 0)
    offset = offsets.get(ssp, 0)
    offsets[ssp] = offset + 1
    if codec is None:
        return Envelope(ssp, offset, key, value, 0, {})
    key_serde, value_serde = codec.serdes(stream)
    record = Record(ssp.partition, offset, None if key is None else key_serde.to_bytes(key),
                    None if value is None else value_serde.to_bytes(value), 0)
    return codec.decode(ssp, record)  # what the task would see in production


async def run_task_async(
    task: type[StreamTask] | StreamTask,
    inputs: Iterable[InputRecord],
    *,
    stores: Mapping[str, Mapping[Any, Any] | None] | None = None,
    config: JobConfig | str | os.PathLike[str] | None = None,
    windows: int = 0,
    write_buffer_max_keys: int | None = None,
) -> TaskRunResult:
    """`run_task` for code already inside an event loop."""
    items = list(inputs)
    stores = dict(stores or {})
    streams = [f"{i.ssp.system}.{i.ssp.stream}" if isinstance(i, Envelope) else str(i[0])
               for i in items]
    job, lenient = _job_config(config, streams, stores)
    if not lenient:
        stores = {name: stores.get(name) for name in sorted({*job.stores, *stores})}
    codec = None if lenient else RecordCodec(job)
    max_keys = write_buffer_max_keys or job.write_buffer_max_keys
    task_stores: dict[str, TaskStore] = {}
    for name, contents in stores.items():
        spec = job.store(name)
        store = TaskStore(name, MemoryEngine(), get_serde(spec.key_serde, search_path=job.root),
                          get_serde(spec.value_serde, search_path=job.root), max_keys,
                          task=TASK_NAME)
        for key, value in (contents or {}).items():
            store.put(key, value)
        store.apply(store.drain(), None)
        task_stores[name] = store
    offsets: dict[SystemStreamPartition, int] = {}
    envelopes = [_envelope(item, offsets, codec) for item in items]
    instance = _TestInstance(TASK_NAME, task() if isinstance(task, type) else task,
                             frozenset(offsets), task_stores, job)
    instance.lenient = lenient
    result = TaskRunResult()

    def commit() -> None:
        for store in task_stores.values():
            store.apply(store.drain(), None)
        messages = instance.take_messages()
        if codec is not None:
            for message in messages:
                codec.encode(message)  # a send the worker could not serialize fails here too
        result.outputs.extend(messages)
        instance.committed()
        result.commits += 1

    await instance.init()
    for envelope in envelopes:
        await instance.process(envelope)
        if instance.commit_requested or instance.buffers_full():
            commit()
        if instance.shutdown_requested:
            break
    for _ in range(windows):
        if instance.shutdown_requested:
            break
        await instance.window()
    commit()
    await instance.close()
    result.processed = instance.processed
    result.shutdown_requested = instance.shutdown_requested
    result.stores = {name: dict(store.all()) for name, store in task_stores.items()}
    return result


def run_task(
    task: type[StreamTask] | StreamTask,
    inputs: Iterable[InputRecord],
    *,
    stores: Mapping[str, Mapping[Any, Any] | None] | None = None,
    config: JobConfig | str | os.PathLike[str] | None = None,
    windows: int = 0,
    write_buffer_max_keys: int | None = None,
) -> TaskRunResult:
    """Run ``task`` (a class or an instance) over ``inputs`` and return what it did.

    ``stores`` names the stores the task opens, with optional initial contents. Without
    ``config`` they use the default serdes (string keys, JSON values) and any output
    stream is accepted. With ``config`` (a `JobConfig` or a job file path) every declared
    store exists (all in memory), inputs and outputs pass through the streams' serdes as
    in a worker, and sends to undeclared streams fail. ``windows`` calls `window` that
    many times after the inputs. Stores commit when the task asks, when a write buffer
    fills, and at the end.
    """
    return asyncio.run(run_task_async(task, inputs, stores=stores, config=config,
                                      windows=windows,
                                      write_buffer_max_keys=write_buffer_max_keys))

