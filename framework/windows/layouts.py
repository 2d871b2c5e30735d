"""How a key's open windows are laid out in its state list, per window kind: folding a
record in, and splitting off the windows a close emits. Pure list arithmetic; `Windows`
keeps the lists in the store and decides when windows close.

Four layouts, each a flat list ordered oldest first:

- `Panes` (``[pane start, aggregate, …]``) — tumbling and hopping windows whose size is a
  multiple of their advance, with a reducer that can merge: a record updates the one
  pane of ``advance_ms`` holding it, and a window's aggregate merges its panes when it
  closes. A record costs one fold whatever ``size / advance`` is.
- `Columns` (``[pane start, column, …]``) — the same panes for a mean or an `aggregate`
  of built-in reducers, their aggregates' numbers inline (a mean's sum and count as two
  columns) instead of a list per pane.
- `PerWindow` (``[window start, aggregate, …]``) — the other tumbling and hopping windows:
  a record is folded into every window holding it.
- `Sessions` (``[first ts, last ts, aggregate, …]``).

``closed`` is the bound of the last close: every window ending (sessions: closing) at or
before it has been emitted. Parts of a state only such windows need are dropped when a
state is read (`open_part`).

>>> from framework.windows.reducers import count
>>> panes = Panes(Hopping(size_ms=300, advance_ms=100), count())
>>> state = panes.fold(panes.fold(None, {}, 120)[0], {}, 250)[0]
>>> state
[100, 1, 200, 1]
>>> panes.split(state, closed=-1, bound=400)
([(0, 300, 2), (100, 400, 2)], [200, 1])
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import reduce
from typing import Any

from framework.windows.kinds import Hopping, Session, WindowKind
from framework.windows.reducers import PURE_MERGES, Inline, Reducer
from framework.windows.state import key_from_text

__all__ = ["LATER", "Columns", "Layout", "Panes", "PerWindow", "Sessions", "columns_fit",
           "describe", "layout_for", "snapshot"]

Closed = list[tuple[int, int, Any]]
"""Windows a close emits: ``(start, end, aggregate)``, oldest first."""
LATER = 2
"""What `Sessions.fold` returns (instead of True or False) when a state's first window
now closes later than before: its due time may move later (`DueIndex.move`)."""
Taken = list[tuple[int, str]]
"""The keys a close takes (`DueIndex.due`): ``(due time, key text)``."""
Load = Callable[[str], "list[Any] | None"]
"""A key's open state (None: none)."""
Finish = Callable[[Any], Any] | None
"""`Reducer.result` (None: the aggregate is the result)."""
Kept = list[tuple[str, list[Any], int]]
"""What keys keep after a close: ``(key text, remaining state, next due time)``."""
Cuts = list[int] | None
"""Given to a close as a list: the close may keep a state uncut — the key's own list —
and say here, per kept row, how many leading items it drops once the close is done
(`KeyedStates.finish_close`), instead of copying what remains; it leaves the list empty
when its kept states are new lists. None: kept states are always new lists."""


class Panes:
    """Tumbling and hopping windows kept as panes of ``advance_ms`` (see the module)."""

    name = "panes"
    width = 2
    lag = 0
    """A window closes ``lag`` after its end (sessions: its end + gap)."""

    def __init__(self, kind: Hopping, reducer: Reducer) -> None:
        assert reducer.merge is not None and kind.size_ms % kind.advance_ms == 0
        self.size, self.advance = kind.size_ms, kind.advance_ms
        self.start, self.add, self.merge = reducer.start, reducer.add, reducer.merge
        self.pure = reducer.merge in PURE_MERGES  # leaves its arguments as they are
        self.merge_all = reducer.merge_all if self.pure else None
        self.finish = reducer.result
        self.merge_result = reducer.merge_result if self.pure else None
        inline = reducer.inline
        alone = (self.merge_result is not None and not reducer.parts and inline is not None
                 and not inline.columns)
        self._value: Callable[[list[Any], int, int], Any] = (
            _column_merge(reducer, 2) if alone else self._merged)
        """A window's result from its panes ``state[low:high]`` (`_close_grid`): a lone
        count, sum, min or max merged in place over the state, with no list per window."""
        self._adds = (alone and inline is not None and inline.merge == _ADD
                      and inline.result is None)
        """A lone count or sum: `_close_grid` adds the panes up as it walks them."""

    def fold(self, state: list[Any] | None, value: Any, ts: int) -> tuple[list[Any], bool]:
        """``state`` (changed in place) with the record at ``ts`` folded in, and whether
        it gained an older pane than it had (its first window may close sooner)."""
        pane = ts - ts % self.advance
        if state is None:
            return [pane, self.start(value)], True
        i = len(state) - 2
        if state[i] == pane:  # the common case: the newest pane
            state[i + 1] = self.add(state[i + 1], value)
            return state, False
        while i >= 0 and state[i] > pane:
            i -= 2
        if i >= 0 and state[i] == pane:
            state[i + 1] = self.add(state[i + 1], value)
            return state, False
        state[i + 2:i + 2] = (pane, self.start(value))
        return state, i < 0

    def first_close(self, state: list[Any], closed: int) -> int:
        """When the first window of ``state`` not yet emitted closes (its end)."""
        first: int = state[0]
        end = max(0, first - self.size + self.advance) + self.size
        if end <= closed:
            end = closed - closed % self.advance + self.advance
        return end

    def needed_until(self, state: list[Any], i: int) -> int:
        """The end of the last window that needs the pane at ``state[i]``."""
        return state[i] + self.size  # type: ignore[no-any-return]

    def windows(self, state: list[Any], after: int, until: int) -> Closed:
        """The windows holding records whose end is in ``(after, until]``, oldest first.

        Window ends are multiples of the advance, at least ``size`` (no window starts
        before 0); the first one holding a pane ``p`` ends at ``p + advance``. A window
        holding no pane is skipped to the first that holds the next one.
        """
        size, advance, merge, pure = self.size, self.advance, self.merge, self.pure
        merge_all = self.merge_all
        found: Closed = []
        n = len(state)
        if not n:
            return found
        end = max(state[0] + advance, size, after - after % advance + advance)
        low = 0  # the first pane the window ending at ``end`` can hold
        while end <= until:
            start = end - size
            while low < n and state[low] < start:
                low += 2
            if low == n:
                break
            if state[low] >= end:  # no pane in this window: on to the next pane's first
                end = state[low] + advance
                continue
            j = low + 2
            while j < n and state[j] < end:
                j += 2
            if j == low + 2:  # one pane: the result must not change with it
                aggregate = state[low + 1]
                if type(aggregate) not in _SCALARS:
                    aggregate = snapshot(aggregate)
            elif merge_all is not None:  # pure, in one call
                aggregate = merge_all(state[low + 1:j:2])
            elif pure:  # a new aggregate: nothing to copy
                aggregate = reduce(merge, state[low + 1:j:2])
            else:  # merged into: the first pane stays as it is
                aggregate = reduce(merge, state[low + 3:j:2], snapshot(state[low + 1]))
            found.append((start, end, aggregate))
            end += advance
        return found

    def touched(self, state: list[Any], ts: int) -> Closed:
        """The windows holding ``ts``, as they are now (emit="update")."""
        pane = ts - ts % self.advance
        first = max(0, pane - self.size + self.advance)
        return self.windows(state, first + self.size - 1, pane + self.size)

    def split(self, state: list[Any], closed: int, bound: int) -> tuple[Closed, list[Any]]:
        """The windows a close at ``bound`` emits (the last close was at ``closed``), and
        the panes still needed."""
        emitted, remaining, _ = self.close(state, closed, bound)
        return emitted, remaining

    def close(self, state: list[Any], closed: int, bound: int
              ) -> tuple[Closed, list[Any], int]:
        """`split`, and when what it leaves is next due (`first_close` after ``bound``;
        0 when it leaves nothing): one call per key a close takes."""
        size, advance, n, i = self.size, self.advance, len(state), 0
        if size == advance:  # tumbling: a pane is a window, and it leaves the state
            emitted: Closed = []
            while i < n and state[i] + size <= bound:
                start = state[i]
                if start + size > closed:
                    emitted.append((start, start + size, state[i + 1]))
                i += 2
        else:
            emitted = self.windows(state, closed, bound)
            while i < n and state[i] + size <= bound:
                i += 2
        if i == n:
            return emitted, [], 0
        first = state[i]
        end = max(0, first - size + advance) + size
        if end <= bound:
            end = bound - bound % advance + advance
        return emitted, state[i:], end

    def close_all(self, taken: Taken, load: Load, closed: int, bound: int, finish: Finish,
                  result: type[tuple[Any, ...]], cuts: Cuts = None
                  ) -> tuple[list[Any], Kept, list[str]]:
        """`close` of every key ``taken``, in one call: the results — ``result((key,
        start, end, finish(aggregate), True))`` per window emitted, key by key in the
        order of ``taken`` —, what the keys keep (`Kept`: a kept state is a new list, or
        with ``cuts`` the key's own, uncut) and the keys that keep nothing. No state is
        changed: a close that fails can run again."""
        size, advance, windows = self.size, self.advance, self.windows
        if self.merge_result is not None and finish is self.finish:
            return _close_grid(taken, load, closed, bound, result, size, advance, 2,
                               self._value, cuts, self._adds)
        new = tuple.__new__  # a NamedTuple without its Python __new__
        results: list[Any] = []
        kept: Kept = []
        gone: list[str] = []
        emit, leave = results.append, gone.append
        tumbling = size == advance
        for _, text in taken:
            state = load(text)
            if not state:
                leave(text)
                continue
            n, i = len(state), 0
            if tumbling:
                start = state[0]
                if n == 2 and start + size <= bound:  # the common case: its one window
                    if start + size > closed:
                        aggregate = state[1]
                        emit(new(result, (text[1:] if text[0] == "s" else key_from_text(text),
                                          start, start + size, aggregate if finish is None
                                          else finish(aggregate), True)))
                    leave(text)
                    continue
                key = None
                while i < n and state[i] + size <= bound:
                    start = state[i]
                    if start + size > closed:
                        if key is None:
                            key = (text[1:],) if text[0] == "s" else (key_from_text(text),)
                        aggregate = state[i + 1]
                        emit(new(result, (key[0], start, start + size, aggregate
                                          if finish is None else finish(aggregate), True)))
                    i += 2
            else:
                emitted = windows(state, closed, bound)
                if emitted:
                    name = text[1:] if text[0] == "s" else key_from_text(text)
                    for start, end, aggregate in emitted:
                        emit(new(result, (name, start, end, aggregate if finish is None
                                          else finish(aggregate), True)))
                while i < n and state[i] + size <= bound:
                    i += 2
            if i == n:
                leave(text)
            else:
                first = state[i]
                end = max(0, first - size + advance) + size
                if end <= bound:
                    end = bound - bound % advance + advance
                kept.append((text, state[i:] if i else state, end))
        return results, kept, gone

    def _merged(self, state: list[Any], low: int, high: int) -> Any:
        """The result of the window over the panes ``state[low:high]`` (a built-in
        reducer's: `Reducer.merge_result`; one pane's needs no copy, built-in aggregates
        are never changed in place)."""
        if high - low == 2:
            finish = self.finish
            return state[low + 1] if finish is None else finish(state[low + 1])
        return self.merge_result(state[low + 1:high:2])  # type: ignore[misc]


class PerWindow:
    """Tumbling and hopping windows, each with its own aggregate (see the module)."""

    name = "windows"
    width = 2
    lag = 0

    def __init__(self, kind: Hopping, reducer: Reducer) -> None:
        self.size, self.advance = kind.size_ms, kind.advance_ms
        self.start, self.add = reducer.start, reducer.add

    def fold(self, state: list[Any] | None, value: Any, ts: int) -> tuple[list[Any], bool]:
        """A new state with the record folded into each of its windows, and whether it
        gained an older window than it had."""
        size, advance, start_with, add = self.size, self.advance, self.start, self.add
        last = ts - ts % advance
        first = ts - size + 1
        first = 0 if first <= 0 else first + -first % advance
        merged: list[Any] = []
        if state is None:
            start = first
            while start <= last:
                merged += (start, start_with(value))
                start += advance
            return merged, True
        n, i = len(state), 0
        while i < n and state[i] < first:
            i += 2
        merged = state[:i]
        start = first
        while start <= last:
            if i < n and state[i] == start:
                merged += (start, add(state[i + 1], value))
                i += 2
            else:
                merged += (start, start_with(value))
            start += advance
        merged += state[i:]
        return merged, merged[0] < state[0]

    def first_close(self, state: list[Any], closed: int) -> int:
        return state[0] + self.size  # type: ignore[no-any-return]

    def needed_until(self, state: list[Any], i: int) -> int:
        return state[i] + self.size  # type: ignore[no-any-return]

    def touched(self, state: list[Any], ts: int) -> Closed:
        size = self.size
        return [(state[i], state[i] + size, snapshot(state[i + 1]))
                for i in range(0, len(state), 2) if state[i] <= ts < state[i] + size]

    def split(self, state: list[Any], closed: int, bound: int) -> tuple[Closed, list[Any]]:
        i, size = 0, self.size
        while i < len(state) and state[i] + size <= bound:
            i += 2
        return [(state[j], state[j] + size, state[j + 1]) for j in range(0, i, 2)], state[i:]

    def close(self, state: list[Any], closed: int, bound: int
              ) -> tuple[Closed, list[Any], int]:
        emitted, remaining = self.split(state, closed, bound)
        return emitted, remaining, remaining[0] + self.size if remaining else 0

    def close_all(self, taken: Taken, load: Load, closed: int, bound: int, finish: Finish,
                  result: type[tuple[Any, ...]], cuts: Cuts = None
                  ) -> tuple[list[Any], Kept, list[str]]:
        """`Panes.close_all`: `close` per key (kept states are new lists)."""
        return _close_each(self, taken, load, closed, bound, finish, result)


class Sessions:
    """Session windows (see the module)."""

    name = "sessions"
    width = 3

    def __init__(self, kind: Session, reducer: Reducer) -> None:
        assert reducer.merge is not None
        self.gap = self.lag = kind.gap_ms
        self.start, self.add, self.merge = reducer.start, reducer.add, reducer.merge
        self.finish = reducer.result

    def fold(self, state: list[Any] | None, value: Any, ts: int
                    ) -> tuple[list[Any], int]:
        """The state with the record's session (merging every session within ``gap`` of
        it), and whether its first session may now close sooner (`LATER`: it closes
        later, and no sooner). Sessions are more than
        ``gap`` apart, so a record after the newest one's end + gap, or within gap of it
        and past the one before's end + gap, touches no other: ``state`` is changed in
        place; otherwise a new state is made."""
        gap, merge = self.gap, self.merge
        if state:  # the common cases, in place: after the newest session, or only in it
            n = len(state)
            start, end = state[n - 3], state[n - 2]
            if ts > end + gap:
                state += (ts, ts, self.start(value))
                return state, False
            if ts >= start - gap and (n == 3 or ts > state[n - 5] + gap):
                state[n - 1] = self.add(state[n - 1], value)
                if ts < start:
                    state[n - 3] = ts
                elif ts > end:
                    state[n - 2] = ts
                    return state, LATER if n == 3 else False
                return state, False
        kept: list[tuple[int, int, Any]] = []
        first = last = ts
        joined = None
        for i in range(0, len(state or ()), 3):
            start, end, partial = state[i:i + 3]  # type: ignore[index]
            if start - gap <= ts <= end + gap:
                first, last = min(first, start), max(last, end)
                joined = partial if joined is None else merge(joined, partial)
            else:
                kept.append((start, end, partial))
        aggregate = self.start(value) if joined is None else self.add(joined, value)
        merged: list[Any] = []
        placed = False
        for start, end, partial in kept:
            if not placed and first < start:
                merged += (first, last, aggregate)
                placed = True
            merged += (start, end, partial)
        if not placed:
            merged += (first, last, aggregate)
        if state is None or merged[1] < state[1]:
            return merged, True
        return merged, LATER if merged[1] > state[1] else False

    def touched(self, state: list[Any], ts: int) -> Closed:
        """The session holding ``ts``."""
        return [(state[i], state[i + 1] + 1, snapshot(state[i + 2]))
                for i in range(0, len(state), 3) if state[i] <= ts <= state[i + 1]]

    def first_close(self, state: list[Any], closed: int) -> int:
        return state[1] + self.gap + 1  # type: ignore[no-any-return]

    def needed_until(self, state: list[Any], i: int) -> int:
        return state[i + 1] + self.gap + 1  # type: ignore[no-any-return]

    def split(self, state: list[Any], closed: int, bound: int) -> tuple[Closed, list[Any]]:
        emitted, remaining, _ = self.close(state, closed, bound)
        return emitted, remaining

    def close(self, state: list[Any], closed: int, bound: int
              ) -> tuple[Closed, list[Any], int]:
        n, last = len(state), bound - self.gap - 1  # a session closes when its end <= last
        if not n:
            return [], [], 0
        if state[1] > last:
            return [], state[:], state[1] + self.gap + 1
        if n == 3:  # the common case: the key's one session closes
            return [(state[0], state[1] + 1, state[2])], [], 0
        i = 0
        while i < n and state[i + 1] <= last:
            i += 3
        emitted = [(state[j], state[j + 1] + 1, state[j + 2]) for j in range(0, i, 3)]
        return emitted, state[i:], state[i + 1] + self.gap + 1 if i < n else 0

    def close_all(self, taken: Taken, load: Load, closed: int, bound: int, finish: Finish,
                  result: type[tuple[Any, ...]], cuts: Cuts = None
                  ) -> tuple[list[Any], Kept, list[str]]:
        """`Panes.close_all` for sessions: a key's one session closing inline, `close`
        for the others; with ``cuts``, a key whose sessions all stay open keeps its own
        list (it drops nothing)."""
        gap = self.gap
        last = bound - gap - 1
        close = self.close
        new = tuple.__new__  # a NamedTuple without its Python __new__
        results: list[Any] = []
        kept: Kept = []
        gone: list[str] = []
        emit, leave = results.append, gone.append
        for _, text in taken:
            state = load(text)
            if not state:
                leave(text)
                continue
            if len(state) == 3 and state[1] <= last:  # the common case
                aggregate = state[2]
                emit(new(result, (text[1:] if text[0] == "s" else key_from_text(text),
                                  state[0], state[1] + 1,
                                  aggregate if finish is None else finish(aggregate), True)))
                leave(text)
                continue
            if cuts is not None and state[1] > last:  # grown since it was filed: all open
                kept.append((text, state, state[1] + gap + 1))
                cuts.append(0)
                continue
            emitted, remaining, due = close(state, closed, bound)
            if emitted:
                key = text[1:] if text[0] == "s" else key_from_text(text)
                for start, end, aggregate in emitted:
                    emit(new(result, (key, start, end,
                                      aggregate if finish is None else finish(aggregate),
                                      True)))
            if remaining:
                kept.append((text, remaining, due))
                if cuts is not None:
                    cuts.append(0)
            else:
                leave(text)
        return results, kept, gone


class Columns:
    """Panes of the built-in reducers, kept flat (see the module): ``[pane start, column,
    …, pane start, …]``, a count, sum, min or max one column, a mean two (its sum and
    count). A pane is numbers in the key's one list, not a list of its own (and a mean's
    pair in it): a close reads one list per key, a new pane makes no list, and the
    collector has nothing more to walk. Its windows and results are `Panes`' for the same
    records."""

    name = "columns"
    lag = 0

    def __init__(self, kind: Hopping, reducer: Reducer) -> None:
        self.panes = Panes(kind, reducer)
        """The same windows over aggregates as `Panes` keeps them: the Python close."""
        self.size, self.advance = kind.size_ms, kind.advance_ms
        self.finish = reducer.result
        self.width, self.start_columns, self.add_columns, self._nest = \
            _column_functions(reducer)
        """``start_columns(value)``: a new pane's columns; ``add_columns(state, i, value)``
        folds a record into the pane at ``state[i]`` (`_column_functions`)."""
        self._merge = _column_merge(reducer, self.width)

    def fold(self, state: list[Any] | None, value: Any, ts: int) -> tuple[list[Any], bool]:
        """`Panes.fold` on columns: the pane's columns changed in place (every new
        value computed before any is written), or a new pane's inserted."""
        pane, width = ts - ts % self.advance, self.width
        if state is None:
            return [pane, *self.start_columns(value)], True
        i = len(state) - width
        if state[i] == pane:  # the common case: the newest pane
            self.add_columns(state, i, value)
            return state, False
        while i >= 0 and state[i] > pane:
            i -= width
        if i >= 0 and state[i] == pane:
            self.add_columns(state, i, value)
            return state, False
        state[i + width:i + width] = (pane, *self.start_columns(value))
        return state, i < 0

    def first_close(self, state: list[Any], closed: int) -> int:
        """`Panes.first_close` (it reads the first pane's start only)."""
        return self.panes.first_close(state, closed)

    def needed_until(self, state: list[Any], i: int) -> int:
        """The end of the last window that needs the pane at ``state[i]``."""
        return state[i] + self.size  # type: ignore[no-any-return]

    def nested(self, state: list[Any] | None) -> list[Any] | None:
        """``state`` as `Panes` keeps it: ``[pane start, aggregate, …]`` (new lists).

        >>> from framework.windows.kinds import Tumbling
        >>> from framework.windows.reducers import aggregate, count, mean_of
        >>> flat = Columns(Tumbling(size_ms=10), aggregate(n=count(), avg=mean_of()))
        >>> state = flat.fold(flat.fold(None, 4, 3)[0], 6, 15)[0]
        >>> state, flat.nested(state)
        ([0, 1, 4, 1, 10, 1, 6, 1], [0, [1, [4, 1]], 10, [1, [6, 1]]])
        """
        if not state:
            return state
        nest, width = self._nest, self.width
        nested: list[Any] = []
        for i in range(0, len(state), width):
            nested += (state[i], nest(state, i))
        return nested

    def windows(self, state: list[Any], after: int, until: int) -> Closed:
        """`Panes.windows` of ``state``'s panes."""
        return self.panes.windows(self.nested(state) or [], after, until)

    def touched(self, state: list[Any], ts: int) -> Closed:
        """The windows holding ``ts``, as they are now (emit="update")."""
        return self.panes.touched(self.nested(state) or [], ts)

    def split(self, state: list[Any], closed: int, bound: int) -> tuple[Closed, list[Any]]:
        """The windows a close at ``bound`` emits, and the panes still needed."""
        emitted, remaining, _ = self.close(state, closed, bound)
        return emitted, remaining

    def close(self, state: list[Any], closed: int, bound: int
              ) -> tuple[Closed, list[Any], int]:
        """`Panes.close` of ``state``'s panes; what it keeps is a tail of ``state``."""
        emitted, remaining, due = self.panes.close(self.nested(state) or [], closed, bound)
        return emitted, self._tail(state, remaining), due

    def close_all(self, taken: Taken, load: Load, closed: int, bound: int, finish: Finish,
                  result: type[tuple[Any, ...]], cuts: Cuts = None
                  ) -> tuple[list[Any], Kept, list[str]]:
        """`Panes.close_all` on columns: each window's result merged from the columns
        (`_column_merge`), or, for a ``finish`` of the caller's own, `Panes`' close of
        the rebuilt aggregates (kept states then new lists)."""
        if finish is self.finish:
            return _close_grid(taken, load, closed, bound, result, self.size, self.advance,
                               self.width, self._merge, cuts)
        states: dict[str, list[Any] | None] = {}

        def nested(text: str) -> list[Any] | None:
            states[text] = state = load(text)
            return self.nested(state)

        results, kept, gone = self.panes.close_all(taken, nested, closed, bound, finish,
                                                   result)
        return results, [(text, self._tail(states[text] or [], remaining), due)
                         for text, remaining, due in kept], gone

    def _tail(self, state: list[Any], remaining: list[Any]) -> list[Any]:
        """The columns of the panes `Panes` kept of ``state`` (its last ones)."""
        keep = len(remaining) // 2 * self.width
        return state[len(state) - keep:] if keep else []


COLUMN_PARTS = 32
"""The most reducers an `aggregate` kept in columns may have (stores name their layout,
so this bound stays as it was when columns came)."""


def columns_fit(reducer: Reducer) -> bool:
    """Whether `Columns` can keep ``reducer``'s panes: a mean or an `aggregate` of up to
    `COLUMN_PARTS` built-in reducers reading the value or a field (a lone count, sum, min
    or max is one column already: `Panes` keeps it just so)."""
    if reducer.parts:
        shaped = len(reducer.parts) <= COLUMN_PARTS
    else:
        shaped = reducer.inline is not None and reducer.inline.kind == "mean"
    parts = [part for _, part in reducer.parts] if reducer.parts else [reducer]
    return shaped and all(
        part.inline is not None and part.inline.kind in BUILT_IN
        and (part.inline.of is None or isinstance(part.inline.of, str)) for part in parts)


BUILT_IN = frozenset({"count", "sum", "min", "max", "mean"})
"""The `Inline.kind` of the reducers `Columns` keeps."""


def _column_functions(reducer: Reducer) -> tuple[int, Any, Any, Any]:
    """(width, start, add, nest) of `Columns` for ``reducer``: ``start(value)`` a new
    pane's columns; ``add(state, i, value)`` folds a record into the pane at ``state[i]``
    (the reducers' inline expressions, in their order, all computed before any column is
    written; a field read once); ``nest(state, i)`` that pane's aggregate as the reducer
    makes it.

    >>> from framework.windows.reducers import aggregate, count, mean_of
    >>> width, start, add, nest = _column_functions(aggregate(n=count(), avg=mean_of("x")))
    >>> state = [0, *start({"x": 3})]; add(state, 0, {"x": 5})
    >>> width, state, nest(state, 0)
    (4, [0, 2, 8, 2], [2, [8, 2]])
    """
    single = not reducer.parts
    parts = [reducer] if single else [part for _, part in reducer.parts]
    starts, adds, nests = [], [], []
    fields: dict[str, str] = {}  # a field read → the local it is read into, once
    column = 1
    for part in parts:
        inline = part.inline
        assert inline is not None and (inline.of is None or isinstance(inline.of, str))
        x = "v" if inline.of is None else fields.setdefault(inline.of, f"x{len(fields)}")
        if inline.kind == "mean":  # [sum, count] as two columns
            starts += [x, "1"]
            adds += [f"S[i + {column}] + {x}", f"S[i + {column + 1}] + 1"]
            nests.append(f"[S[i + {column}], S[i + {column + 1}]]")
            column += 2
        else:
            starts.append(inline.start.format(x=x))
            adds.append(_inline_add(inline, f"S[i + {column}]", x))
            nests.append(f"S[i + {column}]")
            column += 1
    nest = nests[0] if single else f"[{', '.join(nests)}]"
    reads = "".join(f"    {name} = v[{field!r}]\n" for field, name in fields.items())
    source = "\n".join([f"def start(v):\n{reads}    return ({', '.join(starts)},)",
                        f"def add(S, i, v):\n{reads}    S[i + 1:i + {column}] = "
                        f"({', '.join(adds)},)",
                        f"def nest(S, i): return {nest}", ""])
    scope: dict[str, Any] = {"min": min, "max": max}
    exec(compile(source, "<columns>", "exec"), scope)
    return column, scope["start"], scope["add"], scope["nest"]


_CHOOSE = {"min": "<", "max": ">"}
"""The comparison `min(a, b)` and `max(a, b)` make: ``b`` replaces ``a`` only when it
compares less (greater), so ties and NaN keep ``a``, as the builtins do."""
_ADD = "{a} + {b}"
"""The inline merge of a count and a sum."""


def _inline_add(inline: Inline, a: str, x: str) -> str:
    """``inline.add`` of aggregate ``a`` and value part ``x`` (a local); a min's or max's
    as the builtin's one comparison, inline, with no call.

    >>> from framework.windows.reducers import max_of
    >>> _inline_add(max_of("x").inline, "S[1]", "x0")
    '(x0 if x0 > S[1] else S[1])'
    """
    if inline.kind in _CHOOSE:
        return f"({x} if {x} {_CHOOSE[inline.kind]} {a} else {a})"
    return inline.add.format(a=a, x=x)


def _column_merge(reducer: Reducer, width: int) -> Callable[[list[Any], int, int], Any]:
    """``merge(state, low, high)``: the result of the window over the panes of width
    ``width`` at ``state[low:high]`` of `Columns` for ``reducer``, merged column by column
    from the left (one accumulator per column) with the reducers' inline merges, then
    their inline results: what `Reducer.merge_result` gives for those panes' aggregates
    (``result`` of the one aggregate, for one pane), the same operations in the same
    order.

    >>> from framework.windows.reducers import aggregate, count, mean_of
    >>> merge = _column_merge(aggregate(n=count(), avg=mean_of()), 4)
    >>> merge([0, 1, 4, 1, 10, 2, 8, 2], 0, 8), merge([0, 1, 4, 1, 10, 2, 8, 2], 4, 8)
    ({'n': 3, 'avg': 4.0}, {'n': 2, 'avg': 4.0})
    """
    single = not reducer.parts
    parts = [reducer] if single else [part for _, part in reducer.parts]
    first, merged, results = [], [], []
    column = 1
    for part in parts:
        inline = part.inline
        assert inline is not None
        if inline.columns:  # a mean: its sum and count, each merged by adding
            names = [f"a{column + c}" for c in range(inline.columns)]
            first += [f"{name} = S[lo + {column + c}]" for c, name in enumerate(names)]
            merged += [f"{name} = {name} + S[i + {column + c}]"
                       for c, name in enumerate(names)]
            result = inline.result.format(a="\0") if inline.result else \
                f"[{', '.join(names)}]"
            for c, name in enumerate(names):  # "{a}[0] / {a}[1]": the locals themselves
                result = result.replace(f"\0[{c}]", name)
            column += inline.columns
        else:
            name = f"a{column}"
            first.append(f"{name} = S[lo + {column}]")
            if inline.kind in _CHOOSE:  # the builtin's one comparison, without its call
                merged += [f"b{column} = S[i + {column}]",
                           f"if b{column} {_CHOOSE[inline.kind]} {name}: {name} = b{column}"]
            else:
                merged.append(f"{name} = {inline.merge.format(a=name, b=f'S[i + {column}]')}")
            result = name if inline.result is None else inline.result.format(a=name)
            column += 1
        results.append(result)
    assert column == width
    value = results[0] if single else "{%s}" % ", ".join(  # noqa: UP031
        f"{name!r}: {result}" for (name, _), result in zip(reducer.parts, results, strict=True))
    source = "\n".join(["def merge(S, lo, hi):", *[f"    {line}" for line in first],
                        f"    for i in range(lo + {width}, hi, {width}):",
                        *[f"        {line}" for line in merged], f"    return {value}", ""])
    scope: dict[str, Any] = {"min": min, "max": max}
    exec(compile(source, "<column merge>", "exec"), scope)
    return scope["merge"]  # type: ignore[no-any-return]


def _close_grid(taken: Taken, load: Load, closed: int, bound: int,
                result: type[tuple[Any, ...]], size: int, advance: int, width: int,
                value: Callable[[list[Any], int, int], Any], cuts: Cuts = None,
                adds: bool = False) -> tuple[list[Any], Kept, list[str]]:
    """`Panes.close_all` of panes ``width`` apart (`Panes`, `Columns`) whose windows'
    results ``value(state, low, high)`` gives from the panes at ``state[low:high]``: per
    key, the windows ending in ``(closed, bound]`` that hold a pane (as `Panes.windows`
    finds them), then the panes still needed and when they are next due (as
    `Panes.close`). With ``cuts``, a kept state is the key's list, uncut, and ``cuts``
    says how many closed items it drops: no copy of what remains (a close keeps most of
    every key's panes) and none to free when the cache takes it. With ``adds`` (panes of
    width 2 whose one aggregate merges by ``+``: a lone count or sum), a window's panes
    are added up as they are found, left to right as ``value`` would: no call, no second
    pass."""
    new = tuple.__new__  # a NamedTuple without its Python __new__
    results: list[Any] = []
    kept: Kept = []
    gone: list[str] = []
    emit, keep, leave = results.append, kept.append, gone.append
    cut = None if cuts is None else cuts.append
    after = closed - closed % advance + advance  # the first window end not emitted yet
    if after < size:
        after = size
    for _, text in taken:
        state = load(text)
        if not state:
            leave(text)
            continue
        n = len(state)
        end = state[0] + advance
        if end < after:
            end = after
        low = 0  # the first pane the window ending at ``end`` can hold
        named = False
        while end <= bound:
            start = end - size
            while low < n and state[low] < start:
                low += width
            if low == n:
                break
            if state[low] >= end:  # no pane in this window: on to the next pane's first
                end = state[low] + advance
                continue
            high = low + width
            if adds:
                total = state[low + 1]
                while high < n and state[high] < end:
                    total = total + state[high + 1]
                    high += 2
            else:
                while high < n and state[high] < end:
                    high += width
                total = value(state, low, high)
            if not named:
                key = text[1:] if text[0] == "s" else key_from_text(text)
                named = True
            emit(new(result, (key, start, end, total, True)))
            end += advance
        i = low  # the panes before it end before ``bound``: closed
        while i < n and state[i] + size <= bound:
            i += width
        if i == n:
            leave(text)
            continue
        end = state[i] - size + advance
        end = (end if end > 0 else 0) + size
        if end <= bound:
            end = bound - bound % advance + advance
        if cut is None:
            keep((text, state[i:] if i else state, end))
        else:
            keep((text, state, end))
            cut(i)
    return results, kept, gone


Layout = Panes | PerWindow | Sessions | Columns


def _close_each(layout: Layout, taken: Taken, load: Load, closed: int, bound: int,
                finish: Finish, result: type[tuple[Any, ...]]
                ) -> tuple[list[Any], Kept, list[str]]:
    """`Panes.close_all` by one `close` call per key."""
    new = tuple.__new__
    results: list[Any] = []
    kept: Kept = []
    gone: list[str] = []
    for _, text in taken:
        emitted, remaining, due = layout.close(load(text) or [], closed, bound)
        if emitted:
            key = text[1:] if text[0] == "s" else key_from_text(text)
            for start, end, aggregate in emitted:
                results.append(new(result, (key, start, end, aggregate if finish is None
                                            else finish(aggregate), True)))
        if remaining:
            kept.append((text, remaining, due))
        else:
            gone.append(text)
    return results, kept, gone

_SCALARS = frozenset({int, float, str, bool, type(None)})


def snapshot(value: Any) -> Any:
    """``value`` as it is now, for a result: an aggregate that stays in a state may be
    changed in place (a fold's ``add``) before the result is encoded at the commit.
    Lists of scalars and lists (`aggregate`'s) are copied without `copy.deepcopy`.

    >>> kept = [3, 7, [7, 2]]
    >>> copied = snapshot(kept); kept[2][0] += 1; copied
    [3, 7, [7, 2]]
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is list:
        scalars = _SCALARS
        if all(type(item) in scalars for item in value):
            return value[:]
        return [snapshot(item) for item in value]
    return copy.deepcopy(value)


def layout_for(kind: WindowKind, reducer: Reducer, stored: str | None) -> Layout:
    """The layout for ``kind`` and ``reducer``; ``stored``: the layout a store with open
    windows was written in (``"windows"`` for stores from before panes, ``"panes"`` for
    an `aggregate` or a mean from before columns), kept until those windows have
    closed."""
    if isinstance(kind, Session):
        return Sessions(kind, reducer)
    panes = reducer.merge is not None and kind.size_ms % kind.advance_ms == 0
    if not panes or stored == "windows":
        return PerWindow(kind, reducer)
    if stored != "panes" and columns_fit(reducer):
        return Columns(kind, reducer)
    return Panes(kind, reducer)


def describe(kind: WindowKind, reducer: Reducer, layout: Layout) -> str:
    """What a store's open windows were aggregated by, e.g. ``"count over hopping
    300000/60000 in panes"``; a task reading them must use the same."""
    if isinstance(kind, Session):
        what = f"sessions of gap {kind.gap_ms}"
    elif kind.advance_ms == kind.size_ms:
        what = f"tumbling {kind.size_ms}"
    else:
        what = f"hopping {kind.size_ms}/{kind.advance_ms}"
    return f"{reducer.name} over {what} in {layout.name}"

