"""A task's event time: how far each input has come, and the task's watermark.

Two sources, chosen per tracker:

- ``"records"`` (default) — a partition's time is the largest event time it delivered
  (records and watermark records alike); the watermark is the least partition time. Like
  Kafka Streams' stream time: exact when every record arrives at most ``grace_ms`` behind
  its partition's time — across an input expansion, when every record is at most
  ``grace_ms`` behind every record written before it to the stream, in any partition
  (workers stop reading a stream that grew until the job model of its new count; see
  docs/windows.md for the condition on Kafka).
- ``"markers"`` — only watermark records ``{"watermark": T}`` count (`framework.windows.watermarks`:
  the producer promises no later record of the stream has ``ts < T``, under one marker key
  per partition of the *final* partition count). The watermark is the least latest ``T``
  over the marker keys — per key, since a key's records stay in order across an expansion
  while a partition's do not. A marker key that moved to a partition the task does not
  read yet holds it back, so this is exact across any expansion the keys cover.

An **idle** partition (``"records"`` only) stops holding the watermark back: one the
worker has read to its end and that delivered nothing for ``idle_timeout_ms`` (the job's
``input_idle_timeout_ms`` by default). The watermark is then the least time of the other
partitions (of every partition that delivered something, when all are idle), until it
delivers again. Partitions behind an expansion barrier are not read, so never idle.

The watermark does not move before the task has heard from all its inputs: with
``"records"``, before every tracked partition — those an expansion added and that wait
behind their barrier included — delivered something; with ``"markers"``, before it has
seen, per stream, at least as many marker keys as it reads partitions (with one key per
final partition, every key of its partitions; an added partition that stays empty then
holds nothing back, as its keys were read in the partitions they came from). It never
goes back, and it is saved with the partition and marker times in the task's store
whenever a decision depends on it (`save`), committed with the input offsets, so
restarts, restores and moves resume from the last commit.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Callable, Iterable
from itertools import repeat
from typing import Any, Literal, Protocol, runtime_checkable

from framework.api import (
    ColumnarBatch,
    Envelope,
    KeyValueStore,
    MessageCollector,
    TaskContext,
    WatermarkSource,
)
from framework.windows.kinds import WindowError
from groupers import SystemStreamPartition

__all__ = ["EventTime", "IdleInputs", "Timestamp", "TracksWatermarks", "WindowTicks"]

Timestamp = Callable[[Envelope], int]
"""The event time of a record, in ms since the epoch (default: ``envelope.timestamp``)."""


@runtime_checkable
class TracksWatermarks(Protocol):
    """A context that reports watermarks to `StreamTask.window` (a worker's; a unit test's
    stand-in may not)."""

    def track_watermark(self, source: WatermarkSource) -> None: ...


@runtime_checkable
class WindowTicks(Protocol):
    """A context that calls back on every window tick (`TaskContext.on_window`)."""

    def on_window(self, callback: Callable[[MessageCollector], object]) -> None: ...


@runtime_checkable
class IdleInputs(Protocol):
    """A context that knows how long each input has been read to its end
    (`TaskContext.input_idle_ms`)."""

    def input_idle_ms(self, ssp: SystemStreamPartition) -> int | None: ...

_UNTRACKED = object()
PARTITION_PREFIX = "t|"
MARKER_PREFIX = "t^"
WATERMARK_KEY = "t~watermark"


def open_window_store(context: TaskContext, name: str) -> KeyValueStore:
    """``context.store(name)``, refused unless its keys are strings (windows and event
    time keep prefixed text keys, ordered by their bytes)."""
    store = context.store(name)
    stores = getattr(context.config, "stores", {})
    spec = stores.get(name) if isinstance(stores, dict) else None
    if spec is not None and spec.key_serde != "string":
        raise WindowError(
            f"task {context.task_name!r}: store {name!r} holds windows, which need string "
            f"keys, but [stores.{name}] has key_serde = {spec.key_serde!r}; remove that "
            f"line (string is the default) or use another store for the windows")
    return store


def envelope_timestamp(envelope: Envelope) -> int:
    return envelope.timestamp


envelope_row = operator.attrgetter("ssp", "offset", "key", "value", "timestamp")
"""An envelope's fields as the windows' batch loops read them (a row per record)."""


def batch_rows(envelopes: Iterable[Envelope], timestamp: Timestamp
               ) -> tuple[Iterable[tuple[Any, ...]], ColumnarBatch | None]:
    """A fetched batch as the windows' loops read it: ``(envelope, ssp, offset, key, value,
    timestamp)`` per record, and the `ColumnarBatch` when it is read as columns (envelope
    None, made when needed) — only where the event time is the record timestamp."""
    if isinstance(envelopes, ColumnarBatch) and timestamp is envelope_timestamp:
        ssp, offsets, keys, values, stamps = envelopes.columns()
        return zip(repeat(None), repeat(ssp), offsets, keys, values, stamps,
                   strict=False), envelopes  # the columns: of one length
    listed = envelopes if type(envelopes) in (list, tuple) else list(envelopes)
    return zip(listed, *zip(*map(envelope_row, listed), strict=True), strict=True), None


def row_envelope(ssp: SystemStreamPartition, offset: int, key: Any, value: Any,
                 timestamp: int) -> Envelope:
    """The envelope of a record the windows read as columns, where one is needed (a
    watermark record, a late one): headers are not among the columns, nor read there."""
    return Envelope(ssp, offset, key, value, timestamp)


def _ssp_text(ssp: SystemStreamPartition) -> str:
    return f"{ssp.system}.{ssp.stream}.{ssp.partition}"


class EventTime:
    """Tracks the event time of ``context``'s input partitions in ``store``.

    ``streams`` limits the partitions tracked to those streams (``"system.stream"``); by
    default every partition of the job's ``inputs`` the task reads (broadcast inputs are
    left out: they are usually tables, not clocks). The tracker reports its watermark to
    ``context``, so a three-parameter `StreamTask.window` receives it.
    """

    def __init__(
        self,
        context: TaskContext,
        store: str | KeyValueStore,
        *,
        source: Literal["records", "markers"] = "records",
        timestamp: Timestamp | None = None,
        streams: Iterable[str] | None = None,
        idle_timeout_ms: int | None = None,
    ) -> None:
        if source not in ("records", "markers"):
            raise WindowError(f"EventTime: source must be 'records' or 'markers', got "
                              f"{source!r}")
        if idle_timeout_ms is None:
            idle_timeout_ms = getattr(context.config, "input_idle_timeout_ms", 0)
        if (not isinstance(idle_timeout_ms, int) or isinstance(idle_timeout_ms, bool)
                or idle_timeout_ms < 0):
            raise WindowError(f"task {context.task_name!r}: EventTime idle_timeout_ms must be "
                              f"a number of milliseconds >= 0 (0: never idle), got "
                              f"{idle_timeout_ms!r}")
        self.store = open_window_store(context, store) if isinstance(store, str) else store
        self.source = source
        self._by_markers = source == "markers"
        self.timestamp: Timestamp = timestamp or envelope_timestamp
        wanted = set(streams) if streams is not None else set(context.config.inputs)
        tracked = sorted(s for s in context.ssps if f"{s.system}.{s.stream}" in wanted)
        if not tracked:
            raise WindowError(
                f"task {context.task_name!r}: EventTime tracks no partition — none of the "
                f"task's inputs belongs to streams {sorted(wanted)}; pass streams= naming "
                f"the task's input streams")
        self._keys = {ssp: PARTITION_PREFIX + _ssp_text(ssp) for ssp in tracked}
        self._times: dict[SystemStreamPartition, int | None] = {
            ssp: self.store.get(key) for ssp, key in self._keys.items()}
        self._unseen = sum(1 for t in self._times.values() if t is None)
        self._low = None if self._unseen else min(self._times.values())  # type: ignore[type-var]
        self._markers: dict[str, int] = {
            key[len(MARKER_PREFIX):]: t for key, t in self.store.prefix(MARKER_PREFIX)}
        self._partitions = Counter(f"{s.system}.{s.stream}" for s in tracked)
        self.watermark: int | None = self.store.get(WATERMARK_KEY)
        """Event time up to which the task has seen its inputs (None before every tracked
        partition delivered something); never lower than an earlier watermark. Read it,
        never set it (an attribute, not a property: windows read it per record)."""
        self._dirty: set[SystemStreamPartition] = set()  # times not yet in the store
        self._mark_dirty = False
        self._idle: set[SystemStreamPartition] = set()  # not holding the watermark back
        self.quiet: dict[SystemStreamPartition, int] = {}
        """Partition → a time up to which its records change nothing here (its time,
        while no partition is idle and the source is records): a record at or before it
        needs no `record` call. Read it, never change it."""
        self._requiet()
        self._idle_ms: Callable[[SystemStreamPartition], int | None] | None = (
            context.input_idle_ms if source == "records" and idle_timeout_ms
            and isinstance(context, IdleInputs) else None)
        self.idle_timeout_ms = idle_timeout_ms
        if isinstance(context, TracksWatermarks):
            context.track_watermark(self)
        if self._idle_ms is not None and isinstance(context, WindowTicks):
            context.on_window(lambda collector: self.refresh_idle())

    def observe(self, envelope: Envelope, timestamp: int | None = None) -> int | None:
        """Account for one record (``timestamp``: its event time if already known); the
        new watermark when it moved forward, else None."""
        value = envelope.value
        ssp = envelope.ssp
        if type(value) is dict and "watermark" in value:  # `is_watermark`, inlined
            time = value["watermark"]
            if self.source == "markers" and ssp in self._times:
                self._marker(f"{ssp.system}.{ssp.stream}|{envelope.key}", time)
        elif self.source == "records":
            time = self.timestamp(envelope) if timestamp is None else timestamp
        else:
            return None
        if ssp not in self._times:
            return None
        return self._advance(ssp, time)

    def _requiet(self) -> None:
        """`quiet` from the partition times, or empty while it cannot be used."""
        self.quiet = {} if self._idle or self._by_markers else {
            ssp: t for ssp, t in self._times.items() if t is not None}

    def record(self, ssp: SystemStreamPartition, timestamp: int) -> None:
        """`observe` a data record (not a watermark record) whose event time is known;
        the hot path of `framework.windows.Windows`."""
        if self._by_markers:
            return
        times = self._times
        old = times.get(ssp, _UNTRACKED)
        if old is _UNTRACKED or old is None or self._idle:
            if old is not _UNTRACKED:
                self._advance(ssp, timestamp)
            return
        if timestamp <= old:  # type: ignore[operator]
            return  # the common case: not a partition's newest time
        # `_advance` of a partition time that moves on while none is idle, inline
        times[ssp] = timestamp
        self.quiet[ssp] = timestamp
        self._dirty.add(ssp)
        if old == self._low and not self._unseen:
            low = self._low = min(times.values())  # type: ignore[type-var]
            if self.watermark is None or low > self.watermark:  # type: ignore[operator]
                self.watermark = low
                self._mark_dirty = True

    def _advance(self, ssp: SystemStreamPartition, time: int) -> int | None:
        times = self._times
        old = times[ssp]
        if old is None or time > old:
            times[ssp] = time
            if not self._idle and not self._by_markers:
                self.quiet[ssp] = time
            self._dirty.add(ssp)
            if old is None:
                self._unseen -= 1
                if not self._unseen:
                    self._low = min(times.values())  # type: ignore[type-var]
            elif old == self._low:
                self._low = min(times.values())  # type: ignore[type-var]
        if self._idle:
            self._still_idle()  # a fetch brought records from it: it holds again
            low = self._idle_low()
        elif self.source == "markers":
            low = self._marker_low()
        elif self._unseen:
            return None
        else:
            low = self._low
        if low is not None and (self.watermark is None or low > self.watermark):
            self.watermark = low
            self._mark_dirty = True
            if self.source == "markers":
                self.save()  # markers are few: keep the store current
            return low
        return None

    def refresh_idle(self) -> int | None:
        """Re-judge which partitions are idle (``"records"``: read to their end with
        nothing delivered for ``idle_timeout_ms``) and move the watermark past them; the
        new watermark when it moved, else None. Runs on every window tick."""
        idle_ms = self._idle_ms
        if idle_ms is None:
            return None
        timeout = self.idle_timeout_ms
        self._idle = {ssp for ssp in self._times
                      if (ms := idle_ms(ssp)) is not None and ms >= timeout}
        self._requiet()
        low = self._idle_low() if self._idle else (None if self._unseen else self._low)
        if low is not None and (self.watermark is None or low > self.watermark):
            self.watermark = low
            self._mark_dirty = True
            return low
        return None

    def _still_idle(self) -> None:
        """Forget idle partitions the worker has fetched records from since (all of a
        fetch's partitions stop being idle before any of its records is processed)."""
        idle_ms = self._idle_ms
        assert idle_ms is not None
        self._idle = {ssp for ssp in self._idle
                      if (ms := idle_ms(ssp)) is not None and ms >= self.idle_timeout_ms}
        self._requiet()

    @property
    def idle(self) -> frozenset[SystemStreamPartition]:
        """The partitions that are idle now (see `refresh_idle`)."""
        return frozenset(self._idle)

    def _idle_low(self) -> int | None:
        """The least time of the partitions not idle (None if one of them delivered
        nothing yet); of those that delivered, when all are idle."""
        idle = self._idle
        active = [t for ssp, t in self._times.items() if ssp not in idle]
        if active:
            return None if None in active else min(active)  # type: ignore[type-var]
        seen = [t for t in self._times.values() if t is not None]
        return min(seen) if seen else None

    def save(self) -> None:
        """Write the partition times and the watermark to the store.

        `observe` keeps them in memory (two writes per record would cost more than the
        window itself); whoever decides by the watermark — closes a window, judges a
        record late — saves first, so the state committed with that decision holds a
        watermark at least as high. A crash loses only moves nobody acted on: the records
        since the commit are processed again and move it again.
        """
        for ssp in self._dirty:
            self.store.put(self._keys[ssp], self._times[ssp])
        self._dirty.clear()
        if self._mark_dirty:
            self.store.put(WATERMARK_KEY, self.watermark)
            self._mark_dirty = False

    def _marker_low(self) -> int | None:
        """The least marker time, once each stream has as many marker keys as partitions."""
        keys = Counter(name.partition("|")[0] for name in self._markers)
        if any(keys[stream] < n for stream, n in self._partitions.items()):
            return None
        return min(t for name, t in self._markers.items()
                   if name.partition("|")[0] in self._partitions)

    def _marker(self, name: str, time: int) -> None:
        if time > self._markers.get(name, time - 1):
            self._markers[name] = time
            self.store.put(MARKER_PREFIX + name, time)

    def describe(self) -> dict[str, Any]:
        """The watermark, each partition's time and each marker key's, for debugging."""
        return {"watermark": self.watermark,
                "partitions": {_ssp_text(s): t for s, t in sorted(self._times.items())},
                "idle": sorted(_ssp_text(s) for s in self._idle),
                "markers": dict(sorted(self._markers.items()))}
