"""`Windows`: keyed window aggregations in event time, kept in a task store.

Store layout (string keys; values through the store's value serde, JSON by default):

- ``k|<key>`` → the key's open windows, flat: ``[start, aggregate, …]`` (tumbling,
  hopping) or ``[first ts, last ts, aggregate, …]`` (sessions), oldest first;
- ``c|<closes_at, 16 digits>|<key>`` → 1: an index of when each key has a window to
  close, so closing reads only what closes;
- ``t|…`` and ``t~watermark``: the `EventTime` tracker's state; ``late``: late records.

A record is *late* when its event time is more than ``grace_ms`` behind the watermark;
it then touches no window. A window closes — its final result is emitted and its state
deleted — when the watermark reaches ``closes_at + grace_ms``; no on-time record can fall
in it after that, so each window's final result is emitted exactly once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

from framework.api import Envelope, KeyValueStore, MessageCollector, TaskContext
from framework.windows.event_time import EventTime, Timestamp, open_window_store
from framework.windows.kinds import MAX_TIME, Hopping, Session, WindowError, WindowKind
from framework.windows.reducers import Reducer

__all__ = ["LatePolicy", "WindowResult", "Windows"]

LatePolicy = Literal["count", "dead-letter", "drop"]
STATE = "k|"
CLOSING = "c|"
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


def key_text(key: Any) -> str:
    """A record key as store-key text: strings as they are, anything else as JSON."""
    if type(key) is str:
        return "s" + key
    if isinstance(key, bytes):
        return "b" + key.hex()
    return "j" + json.dumps(key, sort_keys=True)


def key_from_text(text: str) -> Any:
    kind, rest = text[0], text[1:]
    if kind == "s":
        return rest
    return bytes.fromhex(rest) if kind == "b" else json.loads(rest)


def _time(ms: int) -> str:
    return f"{min(max(ms, 0), MAX_TIME):016d}"


class Windows:
    """Window aggregations of one kind and reducer over the records a task passes to
    `process`, keyed by record key, in the task's store ``store``.

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
        reducer: Reducer,
        *,
        event_time: EventTime | None = None,
        timestamp: Timestamp | None = None,
        emit: Literal["close", "update"] = "close",
        late: LatePolicy = "count",
        late_stream: str | None = None,
        output: str | None = None,
    ) -> None:
        where = f"task {context.task_name!r}, windows in store {store!r}"
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
        self._closed_to: int | None = None  # the watermark the last close ran at
        self._next_close = self._first_closing()
        self._aggregate: Callable[[str, Any, int], list[WindowResult]] = (
            self._into_session if isinstance(kind, Session) else self._into_fixed)

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
        value = envelope.value
        if type(value) is dict and "watermark" in value:
            self.event_time.observe(envelope)
            return self._close_due(collector)
        ts = self.event_time.timestamp(envelope)
        if type(ts) is not int or ts < 0 or ts > MAX_TIME:
            raise WindowError(
                f"{envelope.ssp} offset {envelope.offset}: event time {ts!r} is not a number "
                f"of milliseconds in [0, {MAX_TIME}]; fix the producer or the timestamp= "
                f"function")
        watermark = self.event_time.watermark
        if watermark is not None and ts < watermark - self._grace:
            self._on_late(envelope, ts, watermark, collector)
            return self._close_due(collector)
        results = self._aggregate(key_text(envelope.key), envelope.value, ts)
        self.event_time.observe(envelope, ts)
        if results and self.output is not None:
            self._send(collector, results)  # updates (only with emit="update")
        watermark, next_close = self.event_time.watermark, self._next_close
        if watermark is None or next_close is None or watermark - self._grace < next_close:
            return results  # nothing to close yet (the common case: keep it cheap)
        return results + self._close_due(collector)

    def close_due(self, collector: MessageCollector) -> list[WindowResult]:
        """Close every window the watermark has passed (`process` already does this as the
        watermark moves; call it from `window` when another aggregation shares the
        `EventTime`)."""
        return self._close_due(collector)

    # -- folding records in -------------------------------------------------------------

    def _into_fixed(self, text: str, value: Any, ts: int) -> list[WindowResult]:
        kind: Hopping = self.kind  # type: ignore[assignment]
        start_with, add = self.reducer.start, self.reducer.add
        state_key = STATE + text
        state = self.store.get(state_key) or ()
        touched = kind.starts(ts)
        # Merge the record's windows (ascending) into the stored ones (ascending): the
        # reducer (user code) runs before anything is written.
        merged: list[Any] = []
        new = []
        i, n = 0, len(state)
        for start in touched:
            while i < n and state[i] < start:
                merged += state[i:i + 2]
                i += 2
            if i < n and state[i] == start:
                merged += (start, add(state[i + 1], value))
                i += 2
            else:
                merged += (start, start_with(value))
                new.append(start)
        merged += state[i:]
        for start in new:
            self._index(kind.end(start), text)
        self.store.put(state_key, merged)
        if not self.emit_updates:
            return []
        key = key_from_text(text)
        windows = dict(zip(merged[::2], merged[1::2], strict=True))
        return [WindowResult(key, s, kind.end(s), windows[s], False) for s in touched]

    def _into_session(self, text: str, value: Any, ts: int) -> list[WindowResult]:
        kind: Session = self.kind  # type: ignore[assignment]
        reducer = self.reducer
        merge = reducer.merge
        assert merge is not None
        state_key = STATE + text
        state = self.store.get(state_key) or ()
        sessions = [state[i:i + 3] for i in range(0, len(state), 3)]
        gap = kind.gap_ms
        joined = [s for s in sessions if s[0] - gap <= ts <= s[1] + gap]
        kept = [s for s in sessions if not s[0] - gap <= ts <= s[1] + gap]
        first, last = ts, ts
        aggregate = None
        for start, end, partial in joined:
            first, last = min(first, start), max(last, end)
            aggregate = partial if aggregate is None else merge(aggregate, partial)
        aggregate = reducer.start(value) if aggregate is None else reducer.add(aggregate, value)
        merged = [first, last, aggregate]
        before = {kind.closes_at(s[1]) for s in sessions}
        after = {kind.closes_at(s[1]) for s in kept} | {kind.closes_at(last)}
        for closes in before - after:
            self.store.delete(f"{CLOSING}{_time(closes)}|{text}")
        for closes in after - before:
            self._index(closes, text)
        self.store.put(state_key, [x for s in sorted([*kept, merged]) for x in s])
        if not self.emit_updates:
            return []
        return [WindowResult(key_from_text(text), first, last + 1, aggregate, False)]

    def _index(self, closes: int, text: str) -> None:
        self.store.put(f"{CLOSING}{_time(closes)}|{text}", 1)
        if self._next_close is None or closes < self._next_close:
            self._next_close = closes

    # -- closing --------------------------------------------------------------------------

    def _first_closing(self) -> int | None:
        for key, _ in self.store.range(CLOSING, CLOSING[:-1] + "}"):
            return int(key[2:18])
        return None

    def _close_due(self, collector: MessageCollector) -> list[WindowResult]:
        watermark = self.event_time.watermark
        if watermark is None or watermark == self._closed_to:
            return []
        bound = watermark - self._grace  # windows with closes_at <= bound close now
        if self._next_close is None or self._next_close > bound:
            self._closed_to = watermark
            return []
        self.event_time.save()  # the closes below are committed with this watermark
        entries = [key for key, _ in self.store.range(CLOSING, CLOSING + _time(bound + 1))]
        states: dict[str, list[Any]] = {}
        results = []
        kind = self.kind
        width = 3 if isinstance(kind, Session) else 2
        for index_key in entries:
            self.store.delete(index_key)
            closes, text = int(index_key[2:18]), index_key[19:]
            if text not in states:
                states[text] = self.store.get(STATE + text) or []
            key = key_from_text(text)
            state, remaining = states[text], []
            for i in range(0, len(state), width):
                start: int = state[i]
                if isinstance(kind, Session):
                    last: int = state[i + 1]
                    due, end = kind.closes_at(last) == closes, last + 1
                else:
                    end = kind.end(start)
                    due = end == closes
                if due:
                    results.append(WindowResult(key, start, end, state[i + width - 1]))
                else:
                    remaining += state[i:i + width]
            states[text] = remaining
        for text, remaining in states.items():
            self.store.put(STATE + text, remaining or None)
        if self.output is not None:
            self._send(collector, results)
        # Only now (a failed send leaves them as they were, like the undone store writes).
        self._next_close = self._first_closing()
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
