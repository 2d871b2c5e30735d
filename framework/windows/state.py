"""What windows and joins keep per record key: store-key text, the state text, and an
in-memory index of when each key has something due.

A key's state is one store value, the JSON text of a flat list (e.g. ``[start, aggregate,
…]``), written with orjson: encoding the list through the store's JSON serde (the
stdlib encoder) cost several times the rest of a record's windowing. The text goes into
the store as a string, which any value serde keeps as it is. What orjson cannot write
exactly — integers past 64 bits, NaN and infinities, non-string dict keys — is written
by the stdlib encoder behind a ``~`` (and fails there, as the store would, for what JSON
cannot hold).

>>> text = dump_state([60_000, 3, 120_000, 1])
>>> text, load_state(text)
('[60000,3,120000,1]', [60000, 3, 120000, 1])
>>> load_state(dump_state([2**70]))
[1180591620717411303424]
"""

from __future__ import annotations

import heapq
import json
from collections import deque
from collections.abc import Iterable
from itertools import repeat
from typing import Any

import orjson

from framework.windows.kinds import WindowError

__all__ = ["DueIndex", "dump_state", "key_from_text", "key_text", "load_state"]

_STDLIB = "~"
_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def key_text(key: Any) -> str:
    """A record key as store-key text: ``s`` + a string, ``b`` + hex bytes, else ``j`` +
    JSON."""
    if type(key) is str:
        return "s" + key
    if isinstance(key, bytes):
        return "b" + key.hex()
    return "j" + json.dumps(key, sort_keys=True)


def key_from_text(text: str) -> Any:
    """The record key `key_text` wrote."""
    kind, rest = text[0], text[1:]
    if kind == "s":
        return rest
    return bytes.fromhex(rest) if kind == "b" else json.loads(rest)


def dump_state(state: list[Any]) -> str:
    """``state`` as the text kept in the store (see the module docstring)."""
    try:
        data = orjson.dumps(state)
    except TypeError:
        data = b"null"  # integers past 64 bits, dict keys that are not strings
    if b"null" in data:  # maybe NaN or an infinity, which orjson writes as null
        try:
            return _STDLIB + _encoder.encode(state)
        except (TypeError, ValueError) as error:
            raise WindowError(f"a window or join state cannot be stored as JSON ({error}); "
                              f"aggregates must be numbers, strings, lists or dicts") from None
    return data.decode()


def load_state(stored: Any) -> list[Any]:
    """The list `dump_state` wrote (a list as it is: stores written before the text)."""
    if type(stored) is str:
        if stored[:1] == _STDLIB:
            return json.loads(stored[1:])  # type: ignore[no-any-return]
        return orjson.loads(stored)  # type: ignore[no-any-return]
    return list(stored)


class DueIndex:
    """For every key with open state, a time at or before the first moment something of
    it falls due (a window closes, a joined record expires); `due` hands out the keys
    whose time has come. Kept in memory, rebuilt from the store when a task starts.

    Keys are kept in one bucket per time (window ends fall on few times), so handing out
    a time's keys costs no ordering of the keys. A key moved later (`move`: a session
    growing with each record) stays in the bucket it is in, and is filed under its new
    time only when that bucket comes up (`due`, `next`): once, not once per record. With a
    ``granule``, times are rounded up
    to a multiple of it: keys due at scattered times (sessions, joined records) are then
    handed out together, at most ``granule - 1`` later. Closes must then run at bounds
    rounded down to it (`bound`): a close at ``b`` takes every key with anything due at
    or before ``b``, so whatever is due by a recorded close bound has been handed out.

    >>> index = DueIndex()
    >>> index.note("sa", 50), index.note("sb", 20), index.note("sa", 10), index.note("sa", 30)
    (50, 20, 10, 10)
    >>> index.next(), index.due(30), index.next()
    (10, [(10, 'sa'), (20, 'sb')], None)
    >>> coarse = DueIndex(granule=100)
    >>> coarse.note("sa", 101), coarse.note("sb", 150), coarse.next(), coarse.bound(199)
    (200, 200, 200, 100)
    """

    def __init__(self, granule: int = 1) -> None:
        self.at: dict[str, int] = {}
        """Key → the time it is due (its bucket)."""
        self.granule = granule
        self.buckets: dict[int, list[str]] = {}
        """Time → the keys filed under it. Every key of `at` is filed under its time or an
        earlier one (moved later: `due` and `next` file it again when that bucket comes
        up); a key may also stay in buckets it left, which skip it as `at` tells."""
        self.times: list[int] = []
        """A heap of the buckets' times."""

    def bound(self, bound: int) -> int:
        """The close bound to use for ``bound``: rounded down to the granule."""
        return bound - bound % self.granule if self.granule > 1 else bound

    def note(self, text: str, at: int) -> int:
        """Key ``text`` has something due at ``at`` (kept if earlier than what it has);
        the time it is due now."""
        if self.granule > 1:
            at += -at % self.granule
        due = self.at
        was = due.get(text)
        if was is not None and was <= at:
            return was
        due[text] = at  # filed under ``at`` (written out here: a join notes per record)
        bucket = self.buckets.get(at)
        if bucket is None:
            self.buckets[at] = [text]
            heapq.heappush(self.times, at)
        else:
            bucket.append(text)
        return at

    def note_all(self, due: Iterable[tuple[str, int]]) -> None:
        """`note` for each ``(key, time)`` of ``due``, in one call (a close's kept keys).

        >>> index = DueIndex(granule=10); index.note("sa", 5)
        10
        >>> index.note_all([("sa", 30), ("sb", 21), ("sc", 30)]); index.due(30)
        [(10, 'sa'), (30, 'sb'), (30, 'sc')]
        """
        granule, at, buckets, times = self.granule, self.at, self.buckets, self.times
        for text, time in due:
            if granule > 1:
                time += -time % granule
            was = at.get(text)
            if was is not None and was <= time:
                continue
            at[text] = time
            bucket = buckets.get(time)
            if bucket is None:
                buckets[time] = [text]
                heapq.heappush(times, time)
            else:
                bucket.append(text)

    def note_kept(self, kept: list[tuple[str, list[Any], int]],
                  cache: dict[str, list[Any]] | None) -> list[tuple[str, list[Any], int]]:
        """A close's kept rows ``(key, remaining, due)``: each row that keeps something
        has ``cache[key] = remaining`` (unless ``cache`` is None) and is noted at ``due``
        (`note_all`); the rows that keep nothing are returned, in order.

        >>> index, cache = DueIndex(), {}
        >>> index.note_kept([("sa", [5, 1], 30), ("sb", [], 20)], cache), cache, index.at
        ([('sb', [], 20)], {'sa': [5, 1]}, {'sa': 30})
        """
        granule, at, buckets, times = self.granule, self.at, self.buckets, self.times
        if kept and cache is not None:
            texts, states, dues = zip(*kept, strict=True)
            # The common close (every key it took keeps panes, due again at one time, and
            # none noted since `due` took it out) in a few passes of builtins (map, zip,
            # dict.update), not a Python loop per row.
            if granule > 1:
                dues = tuple(time + -time % granule for time in dues)
            if (all(states) and dues.count(dues[0]) == len(dues)
                    and len(set(texts)) == len(texts)
                    and not any(map(at.__contains__, texts))):
                cache.update(zip(texts, states, strict=True))
                at.update(zip(texts, dues, strict=True))
                bucket = buckets.get(dues[0])
                if bucket is None:
                    buckets[dues[0]] = list(texts)
                    heapq.heappush(times, dues[0])
                else:
                    bucket += texts
                return []
        empty = []
        filed, bucket = None, None  # the last time filed under, and its bucket
        for row in kept:
            text, remaining, time = row
            if not remaining:
                empty.append(row)
                continue
            if cache is not None:
                cache[text] = remaining
            if granule > 1:
                time += -time % granule
            was = at.get(text)
            if was is not None and was <= time:
                continue
            at[text] = time
            if time != filed:  # most kept keys of a close are due at one time
                bucket = buckets.get(time)
                if bucket is None:
                    bucket = buckets[time] = []
                    heapq.heappush(times, time)
                filed = time
            bucket.append(text)  # type: ignore[union-attr]
        return empty

    def move(self, text: str, at: int) -> int:
        """Key ``text`` has nothing due before ``at`` any more: its time becomes ``at``,
        also when later (then it stays filed where it is, an earlier time: see the class).

        >>> index = DueIndex(); index.note("sa", 10), index.move("sa", 40)
        (10, 40)
        >>> index.buckets
        {10: ['sa']}
        >>> index.due(30), dict(index.buckets), index.due(40)
        ([], {40: ['sa']}, [(40, 'sa')])
        """
        if self.granule > 1:
            at += -at % self.granule
        due = self.at
        was = due.get(text)
        if at != was:
            due[text] = at
            if was is not None and was < at:
                return at  # filed under ``was``, earlier: `due` or `next` files it again
            bucket = self.buckets.get(at)
            if bucket is None:
                self.buckets[at] = [text]
                heapq.heappush(self.times, at)
            else:
                bucket.append(text)
        return at

    def next(self) -> int | None:
        """The earliest time anything is due, or None."""
        times, buckets, at = self.times, self.buckets, self.at
        while times:
            time = times[0]
            bucket = buckets[time]
            if any(at.get(text) == time for text in bucket):
                return time
            del buckets[heapq.heappop(times)]  # every key in it moved (or was taken)
            self._refile(bucket, time)
        return None

    def _refile(self, bucket: list[str], time: int) -> None:
        """File the keys of ``bucket`` (time ``time``, taken out) that were moved later
        under their time (`move` left them there)."""
        at, buckets, times = self.at, self.buckets, self.times
        for text in bucket:
            was = at.get(text)
            if was is not None and was > time:
                later = buckets.get(was)
                if later is None:
                    buckets[was] = [text]
                    heapq.heappush(times, was)
                else:
                    later.append(text)

    def due(self, bound: int) -> list[tuple[int, str]]:
        """Take out every key due at or before ``bound``: ``(time, key)`` in time order.
        The caller notes again what it keeps open (or `restore`s them on failure)."""
        times, buckets, at = self.times, self.buckets, self.at
        get, forget = at.get, at.__delitem__
        taken: list[tuple[int, str]] = []
        while times and times[0] <= bound:
            time = heapq.heappop(times)
            bucket = buckets.pop(time)
            # A bucket's keys in a few passes of builtins rather than a Python loop per key: the
            # keys still due at ``time`` (once each, in bucket order), then the moved ones.
            dues = list(map(get, bucket))
            if dues.count(time) == len(bucket):  # the common case: none moved or taken
                fresh = bucket
            else:
                fresh = [text for text, was in zip(bucket, dues, strict=True) if was == time]
                for text, was in zip(bucket, dues, strict=True):
                    if was is not None and was > time:  # moved later: filed there now,
                        later = buckets.get(was)  # and taken in this loop if due by bound
                        if later is None:
                            buckets[was] = [text]
                            heapq.heappush(times, was)
                        else:
                            later.append(text)
            if len(set(fresh)) != len(fresh):  # noted again after a move: filed twice
                fresh = list(dict.fromkeys(fresh))
            deque(map(forget, fresh), 0)
            taken += zip(repeat(time), fresh)
        return taken

    def restore(self, taken: list[tuple[int, str]]) -> None:
        """Put back what `due` handed out (its work failed)."""
        for time, text in taken:
            self.note(text, time)

    def clear(self) -> None:
        self.at.clear()
        self.buckets.clear()
        self.times.clear()

    def __len__(self) -> int:
        return len(self.at)
