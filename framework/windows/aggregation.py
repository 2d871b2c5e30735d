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
from collections.abc import Callable, Iterable, Mapping
from heapq import heappush
from typing import Any, Literal, NamedTuple

from framework.api import (
    ColumnarBatch,
    Envelope,
    KeyValueStore,
    MessageCollector,
    TaskContext,
)
from framework.windows.event_time import (
    EventTime,
    Timestamp,
    WindowTicks,
    batch_rows,
    envelope_timestamp,
    open_window_store,
    row_envelope,
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
        ``output`` if set, the windows it closed and — with ``emit="update"`` — changed."""
        return self._fold(((envelope, envelope.ssp, envelope.offset, envelope.key,
                            envelope.value, envelope.timestamp),), collector, None)

    def process_batch(self, envelopes: Iterable[Envelope], collector: MessageCollector
                      ) -> list[WindowResult]:
        """`process` of each record of ``envelopes`` in turn, in one call (from a task's
        `StreamTask.process_batch`): the same results, sends and store, in the same order,
        as that many `process` calls, without a call per record. A worker's batch
        (`ColumnarBatch`) is read as columns, with no envelope per record, where the event
        time is the record timestamp."""
        rows, batch = batch_rows(envelopes, self.event_time.timestamp)
        return self._fold(rows, collector, batch)

    def _fold(self, rows: Iterable[tuple[Any, ...]], collector: MessageCollector,
              batch: ColumnarBatch | None) -> list[WindowResult]:
        """`process_batch` of ``rows``: ``(envelope, ssp, offset, key, value, timestamp)``
        per record (envelope None: read as columns from ``batch``, made when needed)."""
        event_time = self.event_time
        timestamp = event_time.timestamp
        by_envelope = timestamp is envelope_timestamp  # else: by envelopes, never columns
        grace, keyed, layout = self._grace, self._keyed, self.layout
        fold, first_close, index = layout.fold, layout.first_close, keyed.index
        dirty_add, emptied, updates = keyed.dirty.add, keyed.emptied, self.emit_updates
        shape, gap, advance, width, start, add = _shape(layout)
        counting = _counts(self.reducer)  # a lone count(): 1 and + 1, with no call
        due_at, buckets, times, granule = index.at, index.buckets, index.times, index.granule
        max_time = MAX_TIME
        results: list[WindowResult] = []
        # What only this loop's own calls change, kept in locals between them: the time
        # before which a record is late (the watermark - grace; -1 while there is no
        # watermark: none is late), the next close, the states' cache (`KeyedStates.hot`)
        # and the quiet time of the last record's partition.
        watermark = event_time.watermark
        late_before = -1 if watermark is None else watermark - grace
        next_close = self._next_close
        hot = keyed.hot
        filed_at: int | None = None  # the due bucket a first state was last filed in
        filed: list[str] = []
        quiet_ssp: Any = None
        quiet: int | None = None
        offset = None
        try:
            for envelope, ssp, offset, key, value, ts in rows:
                if type(value) is dict and "watermark" in value:
                    event_time.observe(envelope or row_envelope(ssp, offset, key, value, ts))
                    self._next_close = next_close
                    results += self._close_due(collector)
                    watermark = event_time.watermark
                    late_before = -1 if watermark is None else watermark - grace
                    next_close = self._next_close
                    hot, quiet_ssp, filed_at = keyed.hot, None, None
                    continue
                if not by_envelope:
                    ts = timestamp(envelope)
                if type(ts) is not int or ts < 0 or ts > max_time:
                    raise WindowError(
                        f"{ssp} offset {offset}: event time {ts!r} is not "
                        f"a number of milliseconds in [0, {MAX_TIME}]; fix the producer or the "
                        f"timestamp= function")
                if ts < late_before:
                    self._next_close = next_close
                    self._on_late(envelope or row_envelope(ssp, offset, key, value, ts), ts,
                                  late_before + grace, collector)
                    results += self._close_due(collector)
                    next_close = self._next_close
                    hot, filed_at = keyed.hot, None
                    continue
                text = "s" + key if type(key) is str else key_text(key)
                # The record folded into its key's windows: the reducer (user code) runs
                # before anything is written.
                if hot is not None:
                    old = hot.get(text)
                    # The layouts' common cases in place, inline (the same steps as their
                    # `fold`, which takes every other case).
                    if not shape:
                        state, sooner = fold(old, value, ts)
                    elif not old:  # the key's first state (its windows all closed since)
                        if shape == _SESSIONS:
                            state = [ts, ts, 1 if counting else start(value)]
                            closes = ts + gap + 1
                        else:
                            if shape == _PANES:
                                state = [ts - ts % advance, 1 if counting else start(value)]
                            else:
                                state = [ts - ts % advance, *start(value)]
                            closes = first_close(state, keyed.closed)
                        if granule > 1:
                            closes += -closes % granule
                        # `DueIndex.note`, inline: a key without state has no due time,
                        # and the first states of a batch mostly fall due together
                        due_at[text] = closes
                        if closes != filed_at:
                            bucket = buckets.get(closes)
                            if bucket is None:
                                bucket = buckets[closes] = []
                                heappush(times, closes)
                            filed, filed_at = bucket, closes
                        filed.append(text)
                        if next_close is None or closes < next_close:
                            next_close = closes
                        sooner = False
                    elif shape == _SESSIONS:
                        n = len(old)
                        first, last = old[n - 3], old[n - 2]
                        if ts > last + gap:  # a new session after the newest
                            old += (ts, ts, start(value))
                            state, sooner = old, False
                        elif ts >= first - gap and (n == 3 or ts > old[n - 5] + gap):
                            # into the newest one
                            old[n - 1] = old[n - 1] + 1 if counting else add(old[n - 1], value)
                            state, sooner = old, False
                            if ts < first:
                                old[n - 3] = ts
                            elif ts > last:
                                old[n - 2] = ts
                                if n == 3:  # its one session closes later: `move`, inline
                                    later = ts + gap + 1
                                    if granule > 1:
                                        later += -later % granule
                                    was = due_at.get(text)
                                    if was is not None and was < later:
                                        # still filed under ``was``, where the next close
                                        # (at or before it) takes or refiles it
                                        due_at[text] = later
                                    else:
                                        sooner = LATER
                        else:
                            state, sooner = fold(old, value, ts)
                    else:  # panes or columns: into the newest pane, or a new one after it
                        pane = ts - ts % advance
                        i = len(old) - width
                        newest = old[i]
                        if newest == pane:
                            if shape == _PANES:
                                old[i + 1] = old[i + 1] + 1 if counting else add(old[i + 1],
                                                                                  value)
                            else:
                                add(old, i, value)
                            state, sooner = old, False
                        elif newest < pane:
                            if shape == _PANES:
                                old += (pane, 1 if counting else start(value))
                            else:
                                old += (pane, *start(value))
                            state, sooner = old, False
                        else:
                            state, sooner = fold(old, value, ts)
                    if state is old:
                        dirty_add(text)  # changed in place
                    elif old is not None or len(hot) < keyed.max_cached:  # `save`, inline
                        hot[text] = state
                        dirty_add(text)
                        if old is None:
                            emptied.discard(text)
                    else:
                        keyed.save(text, state)
                        hot = keyed.hot
                else:
                    state, sooner = fold(keyed.load(text), value, ts)
                    keyed.save(text, state)
                    hot = keyed.hot
                if sooner:  # `DueIndex.note` (`move` for LATER), inline
                    # (a session closes ``gap`` after its last record: `Sessions.first_close`)
                    closes = state[1] + gap + 1 if gap else first_close(state, keyed.closed)
                    if granule > 1:
                        closes += -closes % granule
                    was = due_at.get(text)
                    if was is not None and was < closes and sooner == LATER:
                        due_at[text] = closes  # stays filed under ``was`` (`DueIndex.move`)
                    elif was != closes and (sooner == LATER or was is None or was > closes):
                        due_at[text] = closes
                        bucket = buckets.get(closes)
                        if bucket is None:
                            buckets[closes] = [text]
                            heappush(times, closes)
                        else:
                            bucket.append(text)
                    elif sooner != LATER and was is not None:  # (it is: was <= closes)
                        closes = was
                    if next_close is None or closes < next_close:
                        next_close = closes
                if ssp is not quiet_ssp:
                    quiet_ssp, quiet = ssp, event_time.quiet.get(ssp)
                if quiet is None or ts > quiet:  # else `record` would change nothing
                    event_time.record(ssp, ts)
                    watermark, quiet = event_time.watermark, event_time.quiet.get(ssp)
                    late_before = -1 if watermark is None else watermark - grace
                if updates:
                    results += self._updates(text, state, ts, collector)
                if next_close is None or late_before < next_close:
                    continue  # nothing to close yet (the common case: keep it cheap)
                self._next_close = next_close
                results += self._close_due(collector)
                next_close = self._next_close
                hot, quiet_ssp, filed_at = keyed.hot, None, None
        except BaseException:
            if batch is not None and offset is not None:
                batch.failed_at(offset)
            raise
        finally:
            self._next_close = next_close
        return results

    def close_due(self, collector: MessageCollector) -> list[WindowResult]:
        """Close every window the watermark has passed (`process` does this as the
        watermark moves, and the worker's window tick when it moves without records —
        e.g. past an idle partition)."""
        return self._close_due(collector)

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
            cuts: list[int] = []  # the kept states' closed panes, dropped once sent
            results, kept, gone = self.layout.close_all(
                taken, keyed.load if keyed.hot is None else keyed.hot.get, keyed.closed,
                bound, self.reducer.result, WindowResult, cuts)
            results.sort(key=_end)
            if self.output is not None:
                self._send(collector, results)
        except BaseException:
            keyed.index.restore(taken)  # nothing was written: everything stays open
            raise
        keyed.finish_close(bound, kept, gone, cuts)
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
        output, send = self.output, collector.send
        for key, start, end, value, final in results:  # `WindowResult.as_value`, inline
            send(output, key=key, value={"start": start, "end": end,  # type: ignore[arg-type]
                                         "value": value, "final": final})


def _same(aggregate: Any) -> Any:
    return aggregate


_second, _end = operator.itemgetter(1), operator.itemgetter(2)
_PANES, _COLUMNS, _SESSIONS = 1, 2, 3


def _counts(reducer: Reducer) -> bool:
    """Whether ``reducer`` is a lone `count` (start 1, add 1: `Windows._fold` inlines
    them)."""
    return reducer.inline is not None and reducer.inline.kind == "count" and not reducer.parts


def _shape(layout: Layout) -> tuple[int, int, int, int, Any, Any]:
    """(shape, gap, advance, width, start, add) of ``layout`` for `Windows._fold`'s inline
    folds: `_PANES` (its reducer's start and add), `_COLUMNS` (its column functions),
    `_SESSIONS` (its reducer's), or 0: `fold` takes every record."""
    if isinstance(layout, Sessions):
        return _SESSIONS, layout.gap, 0, 3, layout.start, layout.add
    if isinstance(layout, Panes):
        return _PANES, 0, layout.advance, 2, layout.start, layout.add
    if isinstance(layout, Columns):
        return _COLUMNS, 0, layout.advance, layout.width, layout.start_columns, \
            layout.add_columns
    return 0, 0, 0, 0, None, None

