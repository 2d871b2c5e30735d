"""`Windows`: keyed window aggregations in event time, kept in a task store.

Store layout (string keys; values through the store's value serde, JSON by default):

- ``k|<key>`` → the key's open windows as state text (`framework.windows.state`), laid
  out by `framework.windows.layouts`: panes ``[pane start, aggregate, …]`` (tumbling,
  hopping), ``[window start, aggregate, …]`` (hopping windows whose size is not a
  multiple of the advance, or a reducer without merge) or ``[first ts, last ts,
  aggregate, …]`` (sessions), oldest first;
- ``a~windows`` → what they are aggregated by (reducer, kind, layout), so a task changing
  them over open windows is stopped instead of misreading them;
- ``a~closed`` → the bound of the last close: every window closing at or before it has
  been emitted (`framework.windows.keyed`: closes are lazy in the store);
- ``t|…`` and ``t~watermark``: the `EventTime` tracker's state; ``late``: late records.

A record is *late* when its event time is more than ``grace_ms`` behind the watermark;
it then touches no window. A window closes — its final result is emitted and its state
dropped — when the watermark reaches ``closes_at + grace_ms`` (sessions: up to an eighth
of the gap later, so one close serves the sessions of many keys); no on-time record can
fall in it after that, so each window's final result is emitted exactly once.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple

from framework.api import Envelope, KeyValueStore, MessageCollector, TaskContext
from framework.windows import accel
from framework.windows.event_time import (
    EventTime,
    Timestamp,
    WindowTicks,
    envelope_timestamp,
    open_window_store,
)
from framework.windows.keyed import KeyedStates
from framework.windows.kinds import MAX_TIME, Session, WindowError, WindowKind
from framework.windows.layouts import (
    LATER,
    Columns,
    Layout,
    Panes,
    Sessions,
    describe,
    layout_for,
)
from framework.windows.reducers import Reducer, aggregate
from framework.windows.registry import register_windows
from framework.windows.state import key_from_text, key_text

__all__ = ["LatePolicy", "WindowResult", "Windows"]

LatePolicy = Literal["count", "dead-letter", "drop"]
STATE = "k|"
LEGACY_INDEX = "c|"
"""Where stores written before the in-memory index kept it; deleted when a task starts."""
SHAPE_KEY = "a~windows"
LATE_KEY = "late"


class WindowResult(NamedTuple):
    """One window's aggregate: ``final`` on close, not final for an update."""

    key: Any
    start: int
    end: int
    value: Any
    final: bool = True

    def as_value(self) -> dict[str, Any]:
        """What `Windows` sends to its ``output`` stream."""
        return {"start": self.start, "end": self.end, "value": self.value,
                "final": self.final}




class Windows:
    """Window aggregations of one kind over the records a task passes to `process`,
    keyed by record key, in the task's store ``store``.

    ``reducer`` is one `Reducer` (``count()``, ``sum_of("amount")``, …) or several by
    name — ``{"views": count(), "spent": sum_of("amount")}`` or
    ``aggregate(views=count(), …)`` — computed in one pass into one stored aggregate,
    each window's value then ``{"views": …, "spent": …}``.

    ``event_time`` is the `EventTime` tracker to use (share one between several
    aggregations of a task); by default one over ``store`` taking event times from
    ``timestamp`` (default: the envelope's timestamp). ``emit="update"`` also returns
    (and sends) a non-final result after every change. Late records are counted
    (``late="count"``, the default; see `late`), sent to ``late_stream``
    (``"dead-letter"``) or dropped (``"drop"``). With ``output`` set, every result is
    sent there, keyed by the record key, with value `WindowResult.as_value`.
    """

    def __init__(
        self,
        context: TaskContext,
        store: str,
        kind: WindowKind,
        reducer: Reducer | Mapping[str, Reducer],
        *,
        event_time: EventTime | None = None,
        timestamp: Timestamp | None = None,
        emit: Literal["close", "update"] = "close",
        late: LatePolicy = "count",
        late_stream: str | None = None,
        output: str | None = None,
    ) -> None:
        where = f"task {context.task_name!r}, windows in store {store!r}"
        if isinstance(reducer, Mapping):
            reducer = aggregate(**reducer)
        if not isinstance(reducer, Reducer):
            raise WindowError(f"{where}: the reducer must be count(), sum_of(...), "
                              f"aggregate(...) or a dict of them, got {reducer!r}")
        if emit not in ("close", "update"):
            raise WindowError(f"{where}: emit must be 'close' or 'update', got {emit!r}")
        if late not in ("count", "dead-letter", "drop"):
            raise WindowError(f"{where}: late must be 'count', 'dead-letter' or 'drop', got "
                              f"{late!r}")
        if late == "dead-letter" and not late_stream:
            raise WindowError(f"{where}: late='dead-letter' needs late_stream= naming a "
                              f"stream declared in the job file")
        if isinstance(kind, Session) and reducer.merge is None:
            raise WindowError(f"{where}: session windows merge aggregates, but reducer "
                              f"{reducer.name!r} has no merge; pass fold(..., merge=...)")
        if event_time is not None and timestamp is not None:
            raise WindowError(f"{where}: pass timestamp= to the EventTime you share, not "
                              f"to Windows")
        self.store: KeyValueStore = open_window_store(context, store)
        self.kind = kind
        self.reducer = reducer
        self.event_time = event_time or EventTime(context, self.store, timestamp=timestamp)
        self.emit_updates = emit == "update"
        self.late_policy = late
        self.late_stream = late_stream
        self.output = output
        self._grace = kind.grace_ms
        self._finish: Callable[[Any], Any] = reducer.result or _same
        self._closed_to: int | None = None  # the watermark the last close ran at
        self.layout: Layout = layout_for(kind, reducer, None)
        self._keyed = KeyedStates(self.store, STATE, self._open_part,
                                  lambda state, closed: self.layout.first_close(state, closed),
                                  granule=max(1, kind.gap_ms // 8)
                                  if isinstance(kind, Session) else 1,
                                  legacy=[LEGACY_INDEX])
        self._open_layout(where)
        self._keyed.first_due = self.layout.first_close
        self._next_close = self._keyed.index.next()
        self._step: Callable[[Envelope], Any] | None = None
        """The C step of one record (`_accel.Stepper.step`), or None: Python only."""
        stepper = self._native_stepper()
        if stepper is not None:
            self._step = stepper.step
            if type(self).process is Windows.process:  # a subclass's `process` stays
                self.__dict__["process"] = stepper  # the stepper, called from C
        if isinstance(context, WindowTicks):
            context.on_window(self._close_due)  # windows close on a tick too (idle partitions)
        register_windows(self.store, self)  # issue 49: readable by the query endpoint

    @property
    def watermark(self) -> int | None:
        """The event-time watermark windows close by (see `EventTime`)."""
        return self.event_time.watermark

    @property
    def late(self) -> int:
        """How many late records this task has seen (counted under every policy but drop)."""
        return int(self.store.get(LATE_KEY) or 0)

    def process(self, envelope: Envelope, collector: MessageCollector) -> list[WindowResult]:
        """Fold one record in (or account for a watermark record); return, and send to
        ``output`` if set, the windows it closed and — with ``emit="update"`` — changed.
        (Where the C extension takes the aggregation, an `_accel.Stepper` doing this
        stands in for this method on the instance.)"""
        step = self._step
        if step is not None:  # the common case in C
            done = step(envelope)
            if done is None:
                return []
            if done is True:
                return self._close_due(collector)
        return self._process_python(envelope, collector)

    def _process_python(self, envelope: Envelope, collector: MessageCollector
                        ) -> list[WindowResult]:
        """`process` for a record the C step does not take (or without it)."""
        value = envelope.value
        event_time = self.event_time
        if type(value) is dict and "watermark" in value:
            event_time.observe(envelope)
            return self._close_due(collector)
        timestamp = event_time.timestamp
        ts = envelope.timestamp if timestamp is envelope_timestamp else timestamp(envelope)
        if type(ts) is not int or ts < 0 or ts > MAX_TIME:
            raise WindowError(
                f"{envelope.ssp} offset {envelope.offset}: event time {ts!r} is not a number "
                f"of milliseconds in [0, {MAX_TIME}]; fix the producer or the timestamp= "
                f"function")
        watermark = event_time.watermark
        if watermark is not None and ts < watermark - self._grace:
            self._on_late(envelope, ts, watermark, collector)
            return self._close_due(collector)
        key = envelope.key
        text = "s" + key if type(key) is str else key_text(key)
        # The record folded into its key's windows: the reducer (user code) runs before
        # anything is written.
        keyed = self._keyed
        hot = keyed.hot
        if hot is not None:
            old = hot.get(text)
            state, sooner = self.layout.fold(old, value, ts)
            if state is old:
                keyed.dirty.add(text)  # changed in place
            elif old is not None or len(hot) < keyed.max_cached:  # `save`, inline: it has room
                hot[text] = state
                keyed.dirty.add(text)
                if old is None:
                    keyed.emptied.discard(text)
            else:
                keyed.save(text, state)
        else:
            state, sooner = self.layout.fold(keyed.load(text), value, ts)
            keyed.save(text, state)
        if sooner:
            closes = self.layout.first_close(state, keyed.closed)
            if sooner == LATER:
                closes = keyed.index.move(text, closes)
            else:
                closes = keyed.index.note(text, closes)
            if self._next_close is None or closes < self._next_close:
                self._next_close = closes
        ssp = envelope.ssp
        quiet = event_time.quiet.get(ssp)
        if quiet is None or ts > quiet:  # else `record` would change nothing
            event_time.record(ssp, ts)
        results = self._updates(text, state, ts, collector) if self.emit_updates else []
        watermark, next_close = event_time.watermark, self._next_close
        if watermark is None or next_close is None or watermark - self._grace < next_close:
            return results  # nothing to close yet (the common case: keep it cheap)
        return results + self._close_due(collector)

    def close_due(self, collector: MessageCollector) -> list[WindowResult]:
        """Close every window the watermark has passed (`process` does this as the
        watermark moves, and the worker's window tick when it moves without records —
        e.g. past an idle partition)."""
        return self._close_due(collector)

    def _native_stepper(self) -> Any:
        """`_accel.Stepper` of this aggregation (its `process` in C), or None: its
        layout, reducer, event time or emission need the Python path for every record.
        It holds the keyed states' and due index's containers, which are never rebound."""
        native, layout, event_time = accel.native(), self.layout, self.event_time
        if (native is None or not isinstance(layout, Panes | Columns | Sessions)
                or layout.native_spec is None or self.emit_updates
                or event_time.timestamp is not envelope_timestamp):
            return None
        spec = layout.native_spec
        general: Any = None
        if isinstance(layout, Panes):
            kind, param, size = 0, layout.advance, layout.size
        elif isinstance(layout, Columns):
            kind, param, size = 2, layout.advance, layout.size
        else:
            kind, param, size, general = 1, layout.gap, 0, layout.fold_python
        return native.stepper(self, event_time, self._keyed, self._grace, kind, param, size,
                              spec, general, self._close_due, self._process_python,
                              Windows.process)

    # -- state ----------------------------------------------------------------------------

    def _open_part(self, state: list[Any], closed: int) -> list[Any] | None:
        """``state`` without what only windows closed by ``closed`` needed."""
        layout = self.layout
        i, n, width = 0, len(state), layout.width
        while i < n and layout.needed_until(state, i) <= closed:
            i += width
        return (state[i:] if i else state) or None

    def _open_layout(self, where: str) -> None:
        """The layout of this store's open windows, the due index over them, and the
        check that they were aggregated as this task aggregates."""
        shape = self.store.get(SHAPE_KEY)
        states = self._keyed.stored()
        stored_layout = shape.rsplit(" in ", 1)[1] if shape else ("windows" if states else None)
        self.layout = layout_for(self.kind, self.reducer, stored_layout if states else None)
        wanted = describe(self.kind, self.reducer, self.layout)
        if states and shape is not None and shape != wanted:
            raise WindowError(
                f"{where}: the store holds open windows of {shape!r}, but the task now "
                f"aggregates {wanted!r} and would misread them; keep the old definition until "
                f"those windows have closed, or use a new store for the new one")
        if shape != wanted:
            self.store.put(SHAPE_KEY, wanted)
        self._keyed.rebuild(states)

    def _updates(self, text: str, state: list[Any], ts: int,
                 collector: MessageCollector) -> list[WindowResult]:
        """The windows holding ``ts`` as they are now (``emit="update"``), sent to
        ``output`` if set."""
        key, finish = key_from_text(text), self._finish
        results = [WindowResult(key, start, end, finish(aggregate), False)
                   for start, end, aggregate in self.layout.touched(state, ts)]
        if results and self.output is not None:
            self._send(collector, results)
        return results

    # -- closing --------------------------------------------------------------------------

    def _close_due(self, collector: MessageCollector) -> list[WindowResult]:
        watermark = self.event_time.watermark
        if watermark is None or watermark == self._closed_to:
            return []
        bound = self._keyed.index.bound(watermark - self._grace)  # closes_at <= bound
        if self._next_close is None or self._next_close > bound:
            self._closed_to = watermark
            return []
        self.event_time.save()  # the closes below are committed with this watermark
        keyed = self._keyed
        taken = keyed.start_close(bound)
        try:
            # By closing time, then key (a key closes one window per time): the keys in
            # order, then one stable sort by end (closing time - `Layout.lag`), which
            # costs one pass where a close has one closing time, the common case.
            taken.sort(key=_second)
            results, kept, gone = self.layout.close_all(
                taken, keyed.load if keyed.hot is None else keyed.hot.get, keyed.closed,
                bound, self.reducer.result, WindowResult)
            results.sort(key=_end)
            if self.output is not None:
                self._send(collector, results)
        except BaseException:
            keyed.index.restore(taken)  # nothing was written: everything stays open
            raise
        keyed.finish_close(bound, kept, gone)
        self._next_close = keyed.index.next()
        self._closed_to = watermark
        return results

    # -- late records and output ----------------------------------------------------------

    def _on_late(self, envelope: Envelope, ts: int, watermark: int,
                 collector: MessageCollector) -> None:
        self.event_time.save()  # judged late by this watermark: it must not go back
        if self.late_policy == "drop":
            return
        self.store.put(LATE_KEY, self.late + 1)
        if self.late_policy == "dead-letter":
            assert self.late_stream is not None
            ssp = envelope.ssp
            collector.send(self.late_stream, key=envelope.key, value={
                "stream": f"{ssp.system}.{ssp.stream}", "partition": ssp.partition,
                "offset": envelope.offset, "ts": ts, "watermark": watermark,
                "grace_ms": self._grace, "value": envelope.value})

    def _send(self, collector: MessageCollector, results: list[WindowResult]) -> None:
        output = self.output
        for result in results:
            collector.send(output, key=result.key, value=result.as_value())  # type: ignore


def _same(aggregate: Any) -> Any:
    return aggregate


_second, _end = operator.itemgetter(1), operator.itemgetter(2)
