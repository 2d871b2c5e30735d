"""The task API users write against: StreamTask and what its methods receive."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from framework.errors import TaskLoadError
from framework.importing import ImportSpecError, JobCode, import_spec
from groupers import SystemStreamPartition

if TYPE_CHECKING:
    from framework.config import JobConfig

__all__ = [
    "BatchColumns",
    "ColumnarBatch",
    "Envelope",
    "KeyValueStore",
    "MessageCollector",
    "OutgoingMessage",
    "StreamTask",
    "TaskContext",
    "TaskCoordinator",
    "WatermarkSource",
    "WindowTimes",
    "load_task_class",
]


@dataclass(slots=True, frozen=True)
class Envelope:
    """One input record, deserialized with its stream's serdes."""

    ssp: SystemStreamPartition
    offset: int
    key: Any
    value: Any
    timestamp: int
    headers: Mapping[str, bytes] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class OutgoingMessage:
    """A record a task sent; written to its stream when the task commits."""

    stream: str
    key: Any
    value: Any
    partition: int | None = None
    timestamp: int | None = None
    headers: Mapping[str, bytes] | None = None


class BatchColumns(NamedTuple):
    """The records of a batch of one partition as columns, one entry per record in offset
    order (`ColumnarBatch.columns`): what their envelopes would hold but headers."""

    ssp: SystemStreamPartition
    offsets: Sequence[int]
    keys: Sequence[Any]
    values: Sequence[Any]
    timestamps: Sequence[int]


class ColumnarBatch:
    """What a worker hands `StreamTask.process_batch`: an iterator of the batch's
    envelopes that can also give the records it has not handed out yet as columns, with
    no envelope per record — code that reads only their key, value and timestamp (e.g.
    ``Windows.process_batch``) takes them that way. (A plain class, so that telling one
    from another iterable costs nothing.)"""

    __slots__ = ()

    def __iter__(self) -> Iterator[Envelope]:
        raise NotImplementedError

    def __next__(self) -> Envelope:
        raise NotImplementedError

    def columns(self) -> BatchColumns:
        """Every record not handed out yet, decoded as the envelopes would have been (an
        envelope taken before is finished); the iterator is then exhausted. A record
        that cannot be decoded under ``errors.policy = "fail"`` ends the columns: its
        error is raised when the call returns, after the records before it. An exception
        raised while processing them must be preceded by `failed_at` naming the record's
        offset (the worker's error names it, and the records before it are done)."""
        raise NotImplementedError

    def failed_at(self, offset: int) -> None:
        """The record at ``offset`` of the columns failed: those before it are done."""
        raise NotImplementedError


@dataclass(slots=True, frozen=True)
class WindowTimes:
    """What a `StreamTask.window` declared with a third parameter receives."""

    wall_ms: int
    """Wall-clock time of this call, ms since the epoch."""
    watermark_ms: int | None
    """The task's event-time watermark (the least over its `WatermarkSource`s, e.g. a
    `framework.windows.EventTime`); None while unknown or when nothing tracks event time."""


class WatermarkSource(Protocol):
    """Something tracking a task's event time (`TaskContext.track_watermark`)."""

    @property
    def watermark(self) -> int | None:
        """Event time up to which the task has seen its inputs, or None."""
        ...


class MessageCollector(Protocol):
    """Where a task sends output records (``"system.stream"`` names)."""

    def send(
        self,
        stream: str,
        key: Any = None,
        value: Any = None,
        *,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Mapping[str, bytes] | None = None,
    ) -> None:
        """Queue a record; it becomes visible atomically with the task's next commit."""
        ...


class TaskCoordinator(Protocol):
    """Lets a task ask its worker for a commit soon, or for a clean shutdown."""

    def commit(self) -> None:
        """Commit this task's progress after the current message."""
        ...

    def shutdown(self) -> None:
        """Commit, then stop the worker cleanly."""
        ...


class KeyValueStore(Protocol):
    """A task's view of one state store; keys and values pass through the store's serdes."""

    def get(self, key: Any, default: Any = None) -> Any:
        """The value for ``key``, or ``default`` (None) when it has none."""
        ...

    def __contains__(self, key: Any) -> bool:
        """``key in store``: whether ``key`` has a value."""
        ...

    def put(self, key: Any, value: Any) -> None:
        """Set ``key`` to ``value`` (None deletes)."""
        ...

    def delete(self, key: Any) -> None:
        """Remove ``key``."""
        ...

    def range(self, start: Any, end: Any) -> Iterator[tuple[Any, Any]]:
        """Entries with ``start <= key < end`` in serialized-key order."""
        ...

    def prefix(self, prefix: Any) -> Iterator[tuple[Any, Any]]:
        """Entries whose serialized key starts with the serialized ``prefix``."""
        ...

    def all(self) -> Iterator[tuple[Any, Any]]:
        """Every entry in serialized-key order."""
        ...


class TaskContext(Protocol):
    """What `StreamTask.init` receives."""

    @property
    def task_name(self) -> str:
        """The task's name, e.g. ``"Partition 3"``; stable across expansions."""
        ...

    @property
    def ssps(self) -> frozenset[SystemStreamPartition]:
        """The input partitions this task consumes."""
        ...

    @property
    def config(self) -> JobConfig:
        """The validated job configuration."""
        ...

    def store(self, name: str) -> KeyValueStore:
        """The task's instance of the store ``[stores.<name>]``."""
        ...

    def track_watermark(self, source: WatermarkSource) -> None:
        """Report ``source.watermark`` to `StreamTask.window` (as `WindowTimes`)."""
        ...

    def on_window(self, callback: Callable[[MessageCollector], object]) -> None:
        """Call ``callback(collector)`` on every window tick (``job.window_interval_ms``),
        before the task's own `StreamTask.window`; what it sends or writes commits like
        the rest of the task's work."""
        ...

    def input_idle_ms(self, ssp: SystemStreamPartition) -> int | None:
        """How long every fetch has found ``ssp`` read to its end (ms); None while it
        delivers records, or when it is not read (behind an expansion barrier)."""
        ...


class StreamTask:
    """Base class of user tasks. Override `process`; `init`, `window`, `close` are optional.

    `process` and `window` may be ``async def``; the worker awaits them.
    """

    def init(self, context: TaskContext) -> Awaitable[None] | None:
        """Called once before the first message, with stores already restored."""
        return None

    def process(
        self, envelope: Envelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> Awaitable[None] | None:
        """Handle one input record."""
        raise NotImplementedError(f"{type(self).__name__} must implement process()")

    def process_batch(
        self, envelopes: Iterable[Envelope], collector: MessageCollector,
        coordinator: TaskCoordinator,
    ) -> Awaitable[None] | None:
        """Optional: handle a fetched batch of one input partition's records, in offset
        order, in one call (e.g. ``Windows.process_batch``), where a call per record would
        cost more than the work. Overridden, the worker calls it instead of `process`
        while one task reads the partition and ``process_policy`` is ``"fail"``; it must
        take every record of ``envelopes`` (an iterator: once) and do what `process`
        would do with each in turn, since `process` still takes them one at a time
        elsewhere (several tasks reading a partition, the skip and dead-letter policies,
        `framework.testing`). Not overridden, this calls `process` per record."""
        records = iter(envelopes)
        for envelope in records:
            result = self.process(envelope, collector, coordinator)
            if result is not None:  # an `async def process`: await it and the rest
                return _process_rest(self, result, records, collector, coordinator)
        return None

    def window(
        self, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> Awaitable[None] | None:
        """Called every ``job.window_interval_ms`` when overridden.

        Declared with a third parameter, ``window(self, collector, coordinator, times)``,
        it also receives the `WindowTimes` (wall clock and watermark) of the call.
        """
        return None

    def close(self) -> Awaitable[None] | None:
        """Called once when the worker stops cleanly."""
        return None


async def _process_rest(task: StreamTask, pending: Awaitable[None],
                        records: Iterator[Envelope], collector: MessageCollector,
                        coordinator: TaskCoordinator) -> None:
    """`StreamTask.process_batch` once a `process` call returned an awaitable: that, then
    the records after it."""
    await pending
    for envelope in records:
        result = task.process(envelope, collector, coordinator)
        if result is not None:
            await result


def load_task_class(config: JobCode) -> type[StreamTask]:
    """Import ``job.task`` with the job file's folder first on ``sys.path``; `TaskLoadError`
    names the module, class and file, and the fix."""
    where = f'job.task = "{config.task}" in {config.path}'
    try:
        target = import_spec(config.task, config.root)
    except ImportSpecError as error:
        raise TaskLoadError(f"{where}: {error}") from None
    if not (isinstance(target, type) and issubclass(target, StreamTask)):
        name = config.task.partition(":")[2]
        kind = "a class" if isinstance(target, type) else type(target).__name__
        raise TaskLoadError(
            f"{where}: {config.task} is {kind}, not a StreamTask subclass; define "
            f"`class {name}(StreamTask)` with `from framework.api import StreamTask`"
        )
    return target
