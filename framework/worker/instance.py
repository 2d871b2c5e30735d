"""One task inside a worker: the user's StreamTask plus its stores, outputs and positions."""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from framework.api import (
    Envelope,
    KeyValueStore,
    MessageCollector,
    OutgoingMessage,
    StreamTask,
    WatermarkSource,
    WindowTimes,
)
from framework.config import JobConfig
from framework.errors import ConfigError
from framework.stores.base import BufferedStore
from framework.systems.base import ProducerRecord
from framework.worker.codec import Sent
from groupers import SystemStreamPartition

__all__ = ["TaskInstance"]


async def _maybe_await(result: Awaitable[None] | None) -> None:
    if inspect.isawaitable(result):
        await result


def _wants_times(window: Any) -> bool:
    """True when a task's ``window`` takes a third argument (the `WindowTimes`)."""
    try:
        parameters = list(inspect.signature(window).parameters.values())
    except (TypeError, ValueError):
        return False
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return True
    positional = [p for p in parameters if p.kind in (
        inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3 and (positional[2].default is inspect.Parameter.empty
                                     or positional[2].name == "times")


def _batch_method(task: StreamTask) -> Callable[..., Awaitable[None] | None] | None:
    """``task.process_batch`` if its class overrides it (the worker then hands it whole
    batches), else None."""
    if type(task).process_batch is StreamTask.process_batch:
        return None
    return task.process_batch


class TaskInstance:
    """Runs one task and collects what it produced since the last commit.

    It is the task's `MessageCollector`, `TaskCoordinator` and `TaskContext` at once:
    all three only ever act on this task's own state.
    """

    def __init__(
        self,
        name: str,
        task: StreamTask,
        ssps: frozenset[SystemStreamPartition],
        stores: Mapping[str, BufferedStore],
        config: JobConfig,
        positions: Mapping[SystemStreamPartition, int] | None = None,
    ) -> None:
        self.name = name
        self.task = task
        self._ssps = ssps
        self.stores = dict(stores)
        self._config = config
        self.positions: dict[SystemStreamPartition, int] = dict(positions or {})
        self.outputs: list[Sent] = []  # since the last `take_outputs`
        self.raw_outputs: list[tuple[str, ProducerRecord]] = []  # (system, already-encoded)
        self.commit_requested = False
        self.shutdown_requested = False
        self.has_window = type(task).window is not StreamTask.window
        self._window_times = self.has_window and _wants_times(task.window)
        self._watermarks: list[WatermarkSource] = []
        self._ticks: list[Callable[[MessageCollector], object]] = []
        self.caught_up: Mapping[SystemStreamPartition, float] = {}
        """SSP → `time.monotonic()` since which every fetch found it read to its end
        (kept by the worker; see `input_idle_ms`)."""
        self.processed = 0
        self.skipped = 0
        self.commits = 0
        """Commits made durable with this task's progress."""
        self._declared: set[str] = set()
        self._process = task.process
        self.process_batch = _batch_method(task)
        """The task's `StreamTask.process_batch` where it overrides it, else None."""

    # TaskContext -------------------------------------------------------------------------
    @property
    def task_name(self) -> str:
        return self.name

    @property
    def ssps(self) -> frozenset[SystemStreamPartition]:
        return self._ssps

    @property
    def config(self) -> JobConfig:
        return self._config

    def store(self, name: str) -> KeyValueStore:
        try:
            store = self.stores[name]
        except KeyError:
            raise ConfigError(
                f"task {self.name!r} asked for store {name!r}, which the job file does not "
                f"declare; add a [stores.{name}] table (declared: {sorted(self.stores)})"
            ) from None
        return store

    def track_watermark(self, source: WatermarkSource) -> None:
        self._watermarks.append(source)

    def on_window(self, callback: Callable[[MessageCollector], object]) -> None:
        self._ticks.append(callback)

    def input_idle_ms(self, ssp: SystemStreamPartition) -> int | None:
        since = self.caught_up.get(ssp)
        return None if since is None else int((time.monotonic() - since) * 1000)

    @property
    def watermark(self) -> int | None:
        """The least watermark of the tracked sources (None if any is unknown or none)."""
        marks = [source.watermark for source in self._watermarks]
        if not marks or None in marks:
            return None
        return min(m for m in marks if m is not None)

    # MessageCollector --------------------------------------------------------------------
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
        if stream not in self._declared:
            self._config.stream(stream)  # fail at the send site if the stream is undeclared
            self._declared.add(stream)
        self.outputs.append((stream, key, value, partition, timestamp, headers))

    def take_outputs(self) -> tuple[list[Sent], list[tuple[str, ProducerRecord]]]:
        """Hand what the task sent since the last call to a commit: (sends, already-encoded
        records with their system). The instance starts collecting anew, and the commit
        taking them answers any commit request made so far."""
        outputs, raw = self.outputs, self.raw_outputs
        self.outputs, self.raw_outputs = [], []
        self.commit_requested = False
        return outputs, raw

    def take_messages(self) -> list[OutgoingMessage]:
        """The sends since the last call as `OutgoingMessage` objects, answering any
        commit request (for `framework.testing`); already-encoded records stay."""
        outputs, self.outputs = self.outputs, []
        self.commit_requested = False
        return [OutgoingMessage(*sent) for sent in outputs]

    def committed(self) -> None:
        """A commit carrying everything taken from this instance is durable."""
        self.commits += 1

    # TaskCoordinator ---------------------------------------------------------------------
    def commit(self) -> None:
        self.commit_requested = True

    def shutdown(self) -> None:
        self.shutdown_requested = True

    # Lifecycle ---------------------------------------------------------------------------
    async def init(self) -> None:
        await _maybe_await(self.task.init(self))

    async def renew(self, task: StreamTask, gained: Mapping[SystemStreamPartition, int]
                    ) -> None:
        """Go on with more input partitions (a job model taken in place): the old task
        object is closed, ``task`` replaces it and is initialised seeing every SSP, as
        after a restart; stores, positions and what was not committed yet stay.
        ``gained`` maps each new SSP to the offset its reading starts at."""
        await self.close()
        self.task = task
        self._process = task.process
        self.process_batch = _batch_method(task)
        self.has_window = type(task).window is not StreamTask.window
        self._window_times = self.has_window and _wants_times(task.window)
        self._watermarks, self._ticks = [], []
        self._ssps = self._ssps | frozenset(gained)
        self.positions.update(gained)
        await self.init()

    async def process(self, envelope: Envelope) -> None:
        result = self._process(envelope, self, self)
        if result is not None:  # an `async def process` (or one returning an awaitable)
            await result
        self.positions[envelope.ssp] = envelope.offset + 1
        self.processed += 1

    def skip(self, ssp: SystemStreamPartition, offset: int) -> None:
        """Move past a record that was not processed (errors policy skip/dead-letter)."""
        self.positions[ssp] = offset + 1
        self.skipped += 1

    async def window(self) -> None:
        for tick in self._ticks:
            tick(self)
        if self._window_times:
            times = WindowTimes(int(time.time() * 1000), self.watermark)
            await _maybe_await(self.task.window(self, self, times))  # type: ignore[call-arg]
        elif self.has_window:
            await _maybe_await(self.task.window(self, self))

    async def close(self) -> None:
        await _maybe_await(self.task.close())

    def buffered_writes(self) -> bool:
        """A store holds writes not yet committed (e.g. made by `window`)."""
        return any(store.buffered for store in self.stores.values())

    def buffers_full(self) -> bool:
        """A store's write buffer reached its bound: the worker must commit now."""
        return any(store.is_full for store in self.stores.values())
