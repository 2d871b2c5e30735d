"""`IntervalJoin`: a windowed stream–stream join of two co-partitioned inputs, in event time.

A ``left`` record at ``tl`` and a ``right`` record at ``tr`` with equal keys join when
``tl - before_ms <= tr <= tl + after_ms``. Each pair is emitted once, when the later of
the two is processed. With ``how="left"`` a left record that joined nothing is emitted
with ``right=None`` once no right record can join it any more: when the watermark passes
``tl + after_ms + grace_ms`` — at the next multiple of ``(before_ms + after_ms + grace_ms)
// 8`` ms, so one expiry serves the records of many keys. Records are kept in a task store
until the watermark makes them useless — a left record once no on-time right record can
still fall in its window, a right record once no on-time left record can — so state holds
about ``before_ms + after_ms + grace_ms`` of event time per key. Both inputs must be
co-partitioned (same partition counts, keys partitioned alike), so one task sees both
sides of every key; the fixed-task grouper keeps them together across expansions of either
input.

Store layout (string keys):

- ``j|<key>`` → ``[[tl, joined, left value, …], [tr, right value, …]]``, each side ordered
  by event time (then arrival), as state text (`framework.windows.state`);
- ``a~join`` → which inputs are left and right, so a task swapping them over kept
  records is stopped instead of misreading them;
- ``a~closed`` → the bound of the last expiry: a record whose window ends before it is
  gone (and, left unjoined, emitted) even where a state in the store still holds it;
- ``t|…``, ``t~watermark`` (`EventTime`), ``late``.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from heapq import heappush
from typing import Any, Literal, NamedTuple

from framework.api import (
    ColumnarBatch,
    Envelope,
    KeyValueStore,
    MessageCollector,
    TaskContext,
)
from framework.windows.aggregation import LatePolicy
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
from framework.windows.kinds import MAX_TIME, WindowError
from framework.windows.state import key_from_text, key_text
from groupers import SystemStreamPartition

__all__ = ["IntervalJoin", "JoinResult"]

STATE = "j|"
SHAPE_KEY = "a~join"
LATE_KEY = "late"


class JoinResult(NamedTuple):
    """One joined pair (``right`` None: a left record that joined nothing, left join)."""

    key: Any
    left: Any
    right: Any
    left_ts: int
    right_ts: int | None

    def as_value(self) -> dict[str, Any]:
        """What `IntervalJoin` sends to its ``output`` stream."""
        return {"left": self.left, "right": self.right, "left_ts": self.left_ts,
                "right_ts": self.right_ts}


class IntervalJoin:
    """Joins the records of ``left`` and ``right`` (``"system.stream"`` names, both
    inputs of the task) by key within an event-time interval, in the task's store
    ``store``; see the module docstring for the rule, emission and state.

    ``event_time``, ``timestamp``, ``late`` and ``late_stream`` work as for `Windows`:
    share one `EventTime` with the task's other aggregations, or let the join make one
    over ``store``. A record more than ``grace_ms`` behind the watermark is late and
    joins nothing. With ``output`` set, every result is sent there, keyed by the record
    key, with value `JoinResult.as_value`.
    """

    def __init__(
        self,
        context: TaskContext,
        store: str,
        *,
        left: str,
        right: str,
        before_ms: int,
        after_ms: int,
        grace_ms: int = 0,
        how: Literal["inner", "left"] = "inner",
        event_time: EventTime | None = None,
        timestamp: Timestamp | None = None,
        late: LatePolicy = "count",
        late_stream: str | None = None,
        output: str | None = None,
    ) -> None:
        where = f"task {context.task_name!r}, join in store {store!r}"
        for name, value in (("before_ms", before_ms), ("after_ms", after_ms),
                            ("grace_ms", grace_ms)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise WindowError(f"{where}: {name} must be >= 0 milliseconds, got {value!r}")
        if how not in ("inner", "left"):
            raise WindowError(f"{where}: how must be 'inner' or 'left', got {how!r}")
        if left == right:
            raise WindowError(f"{where}: left and right are both {left!r}; join two streams")
        inputs = set(context.config.inputs)
        for side, name in (("left", left), ("right", right)):
            if name not in inputs:
                raise WindowError(f"{where}: {side}={name!r} is not one of the job's inputs "
                                  f"{sorted(inputs)}; name a stream of job.inputs")
        if late not in ("count", "dead-letter", "drop"):
            raise WindowError(f"{where}: late must be 'count', 'dead-letter' or 'drop', got "
                              f"{late!r}")
        if late == "dead-letter" and not late_stream:
            raise WindowError(f"{where}: late='dead-letter' needs late_stream= naming a "
                              f"stream declared in the job file")
        if event_time is not None and timestamp is not None:
            raise WindowError(f"{where}: pass timestamp= to the EventTime you share, not "
                              f"to IntervalJoin")
        self.store: KeyValueStore = open_window_store(context, store)
        self.left, self.right = left, right
        self.before_ms, self.after_ms, self.grace_ms = before_ms, after_ms, grace_ms
        self.how = how
        self.event_time = event_time or EventTime(context, self.store, timestamp=timestamp)
        self.late_policy, self.late_stream, self.output = late, late_stream, output
        self._sides: dict[SystemStreamPartition, bool] = {}  # partition → is left
        self._closed_to: int | None = None
        self._keyed = KeyedStates(self.store, STATE, self._kept, self._first_due,
                                  granule=max(1, (before_ms + after_ms + grace_ms) // 8))
        self._open(where)
        self._next = self._keyed.index.next()
        if isinstance(context, WindowTicks):
            context.on_window(self._expire_due)

    @property
    def watermark(self) -> int | None:
        """The event-time watermark records expire by (see `EventTime`)."""
        return self.event_time.watermark

    @property
    def late(self) -> int:
        """How many late records this task has seen (counted under every policy but drop)."""
        return int(self.store.get(LATE_KEY) or 0)

    def process(self, envelope: Envelope, collector: MessageCollector) -> list[JoinResult]:
        """Join one record of ``left`` or ``right`` (or account for a watermark record);
        return, and send to ``output`` if set, the pairs it made and the left records the
        watermark left unjoined (``how="left"``)."""
        return self._join(((envelope, envelope.ssp, envelope.offset, envelope.key,
                            envelope.value, envelope.timestamp),), collector, None)

    def process_batch(self, envelopes: Iterable[Envelope], collector: MessageCollector
                      ) -> list[JoinResult]:
        """`process` of each record of ``envelopes`` in turn, in one call (from a task's
        `StreamTask.process_batch`): the same results, sends and store, in the same order,
        as that many `process` calls, without a call per record (a worker's batch read as
        columns where the event time is the record timestamp, as `Windows.process_batch`
        reads it)."""
        rows, batch = batch_rows(envelopes, self.event_time.timestamp)
        return self._join(rows, collector, batch)

    def _join(self, rows: Iterable[tuple[Any, ...]], collector: MessageCollector,
              batch: ColumnarBatch | None) -> list[JoinResult]:
        """`process_batch` of ``rows``: ``(envelope, ssp, offset, key, value, timestamp)``
        per record (envelope None: read as columns from ``batch``, made when needed)."""
        event_time = self.event_time
        timestamp = event_time.timestamp
        by_envelope = timestamp is envelope_timestamp  # else: by envelopes, never columns
        sides, grace, keyed = self._sides, self.grace_ms, self._keyed
        before, after, output = self.before_ms, self.after_ms, self.output
        index = keyed.index
        at, buckets, times, granule = index.at, index.buckets, index.times, index.granule
        dirty, emptied = keyed.dirty, keyed.emptied
        new = tuple.__new__  # a NamedTuple without its Python __new__
        results: list[JoinResult] = []
        # As in `Windows.process_batch`: what only this loop's calls change, in locals.
        watermark, next_due = event_time.watermark, self._next
        quiet_ssp: Any = None
        quiet: int | None = None
        offset = None
        try:
            for envelope, ssp, offset, key, value, ts in rows:
                if type(value) is dict and "watermark" in value:
                    event_time.observe(envelope or row_envelope(ssp, offset, key, value, ts))
                    self._next = next_due
                    results += self._expire_due(collector)
                    watermark, next_due, quiet_ssp = event_time.watermark, self._next, None
                    continue
                is_left = sides.get(ssp)
                if is_left is None:
                    is_left = self._side(ssp, offset)
                if not by_envelope:
                    ts = timestamp(envelope)
                if type(ts) is not int or ts < 0 or ts > MAX_TIME:
                    raise WindowError(
                        f"{ssp} offset {offset}: event time {ts!r} is not "
                        f"a number of milliseconds in [0, {MAX_TIME}]; fix the producer or "
                        f"the timestamp= function")
                if watermark is not None and ts < watermark - grace:
                    self._next = next_due
                    self._on_late(envelope or row_envelope(ssp, offset, key, value, ts), ts,
                                  watermark, collector)
                    results += self._expire_due(collector)
                    next_due = self._next
                    continue
                text = "s" + key if type(key) is str else key_text(key)
                hot = keyed.hot
                state = hot.get(text) if hot is not None else keyed.load(text)
                joined: list[JoinResult] = []
                if not state:  # the common case here: nothing kept for the key
                    if is_left:
                        state = [[ts, 0, value], []]
                        due = ts + after + 1
                    else:
                        state = [[], [ts, value]]
                        due = ts + before + 1
                    if hot is not None and len(hot) < keyed.max_cached:  # `save`, inline
                        hot[text] = state
                        dirty.add(text)
                        emptied.discard(text)
                    else:
                        keyed.save(text, state)
                else:
                    lefts, rights = state
                    if is_left:
                        low, high = ts - before, ts + after
                        for i in range(0, len(rights), 2):
                            if low <= rights[i] <= high:
                                joined.append(new(JoinResult,
                                                  (key, value, rights[i + 1], ts, rights[i])))
                        if not lefts or lefts[-3] <= ts:
                            lefts += (ts, 1 if joined else 0, value)
                        else:
                            _insert(lefts, 3, ts, (ts, 1 if joined else 0, value))
                        due = ts + after + 1
                    else:
                        low, high = ts - after, ts + before
                        for i in range(0, len(lefts), 3):
                            if low <= lefts[i] <= high:
                                lefts[i + 1] = 1
                                joined.append(new(JoinResult,
                                                  (key, lefts[i + 2], value, lefts[i], ts)))
                        if not rights or rights[-2] <= ts:
                            rights += (ts, value)
                        else:
                            _insert(rights, 2, ts, (ts, value))
                        due = ts + before + 1
                    if hot is not None:
                        dirty.add(text)  # changed in place
                    else:
                        keyed.save(text, state)
                was = at.get(text)
                if was is None or was > due:  # `DueIndex.note`, inline
                    if granule > 1:
                        due += -due % granule
                    if was is None or was > due:
                        at[text] = due
                        bucket = buckets.get(due)
                        if bucket is None:
                            buckets[due] = [text]
                            heappush(times, due)
                        else:
                            bucket.append(text)
                    else:
                        due = was
                    if next_due is None or due < next_due:
                        next_due = due
                if ssp is not quiet_ssp:
                    quiet_ssp, quiet = ssp, event_time.quiet.get(ssp)
                if quiet is None or ts > quiet:  # else `record` would change nothing
                    event_time.record(ssp, ts)
                    watermark, quiet = event_time.watermark, event_time.quiet.get(ssp)
                if joined:
                    if output is not None:
                        self._send(collector, joined)
                    results += joined
                if watermark is None or next_due is None or watermark - grace < next_due:
                    continue
                self._next = next_due
                results += self._expire_due(collector)
                next_due, quiet_ssp = self._next, None
        except BaseException:
            if batch is not None and offset is not None:
                batch.failed_at(offset)
            raise
        finally:
            self._next = next_due
        return results

    def expire_due(self, collector: MessageCollector) -> list[JoinResult]:
        """Drop the records the watermark made useless, emitting unjoined left ones
        (``how="left"``); `process` and the worker's window tick call it."""
        return self._expire_due(collector)

    # -- state ----------------------------------------------------------------------------

    def _side(self, ssp: SystemStreamPartition, offset: int) -> bool:
        """Whether the record at ``offset`` of ``ssp`` is of the left input (remembered
        per partition)."""
        name = f"{ssp.system}.{ssp.stream}"
        if name not in (self.left, self.right):
            raise WindowError(f"{ssp} offset {offset}: the join reads "
                              f"{self.left} and {self.right}, not {name}; pass only "
                              f"their records (and watermark records) to it")
        side = self._sides[ssp] = name == self.left
        return side

    def _kept(self, state: list[list[Any]], bound: int) -> list[list[Any]]:
        """``state`` without the records an expiry at ``bound`` removes ([]: nothing
        left)."""
        lefts, rights = state
        i = 0
        while i < len(lefts) and lefts[i] + self.after_ms < bound:
            i += 3
        j = 0
        while j < len(rights) and rights[j] + self.before_ms < bound:
            j += 2
        return [lefts[i:], rights[j:]] if i < len(lefts) or j < len(rights) else []

    def _first_due(self, state: list[list[Any]], closed: int = 0) -> int:
        """When the first of ``state``'s records expires."""
        lefts, rights = state
        if not rights:
            return lefts[0] + self.after_ms + 1  # type: ignore[no-any-return]
        if not lefts:
            return rights[0] + self.before_ms + 1  # type: ignore[no-any-return]
        return min(lefts[0] + self.after_ms, rights[0] + self.before_ms) + 1  # type: ignore

    def _open(self, where: str) -> None:
        shape = f"left={self.left} right={self.right}"
        states = self._keyed.stored()
        stored_shape = self.store.get(SHAPE_KEY)
        if states and stored_shape is not None and stored_shape != shape:
            raise WindowError(f"{where}: the store keeps records joined as {stored_shape!r}, "
                              f"but the task now joins {shape!r}; keep the old sides until "
                              f"those records have expired, or use a new store")
        if stored_shape != shape:
            self.store.put(SHAPE_KEY, shape)
        self._keyed.rebuild(states)

    # -- expiry ---------------------------------------------------------------------------

    def _expire_due(self, collector: MessageCollector) -> list[JoinResult]:
        watermark = self.event_time.watermark
        if watermark is None or watermark == self._closed_to:
            return []
        bound = self._keyed.index.bound(watermark - self.grace_ms)  # expire what is before
        if self._next is None or self._next > bound:
            self._closed_to = watermark
            return []
        self.event_time.save()  # the expiries below are committed with this watermark
        keyed = self._keyed
        taken = keyed.start_close(bound)
        unjoined: list[tuple[int, str, JoinResult]] = []
        load = keyed.load if keyed.hot is None else keyed.hot.get
        after, before, left_join = self.after_ms, self.before_ms, self.how == "left"
        kept: list[tuple[str, list[Any], int]] = []
        gone: list[str] = []
        emit, leave = unjoined.append, gone.append
        new = tuple.__new__  # a NamedTuple without its Python __new__
        try:
            for _, text in taken:
                state = load(text)
                if not state:
                    leave(text)
                    continue
                lefts, rights = state
                if ((not lefts or lefts[-3] + after < bound)
                        and (not rights or rights[-2] + before < bound)):
                    i = len(lefts)  # the common case: all of it goes
                    leave(text)
                else:
                    i = 0
                    while i < len(lefts) and lefts[i] + after < bound:
                        i += 3
                    j = 0
                    while j < len(rights) and rights[j] + before < bound:
                        j += 2
                    left, right = lefts[i:], rights[j:]
                    kept.append((text, [left, right], min(
                        left[0] + after if left else MAX_TIME,
                        right[0] + before if right else MAX_TIME) + 1))
                if left_join and i:
                    key = None
                    for n in range(0, i, 3):
                        if not lefts[n + 1]:
                            if key is None:
                                key = (text[1:],) if text[0] == "s" else (key_from_text(text),)
                            emit((lefts[n], text, new(JoinResult, (
                                key[0], lefts[n + 2], None, lefts[n], None))))
            # By expiry time (left time + after_ms), then key, then arrival: two stable
            # sorts on one field each, over the unjoined records only (most keys an
            # expiry takes emit nothing, so sorting the keys would sort more).
            unjoined.sort(key=_second)
            unjoined.sort(key=_first)
            results = [result for _, _, result in unjoined]
            if self.output is not None:
                self._send(collector, results)
        except BaseException:
            keyed.index.restore(taken)
            raise
        keyed.finish_close(bound, kept, gone)
        self._next = keyed.index.next()
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
                "grace_ms": self.grace_ms, "value": envelope.value})

    def _send(self, collector: MessageCollector, results: list[JoinResult]) -> None:
        output = self.output
        for result in results:
            collector.send(output, key=result.key, value=result.as_value())  # type: ignore


_first, _second = operator.itemgetter(0), operator.itemgetter(1)


def _insert(side: list[Any], width: int, ts: int, entry: tuple[Any, ...]) -> None:
    """Put ``entry`` into ``side`` (entries of ``width`` ordered by time), after every
    entry with the same time: records of one time keep their arrival order."""
    i = len(side)
    while i and side[i - width] > ts:
        i -= width
    side[i:i] = entry
