"""`KeyedStates`: what `Windows` and `IntervalJoin` keep per record key in a task store.

One store value per key (``<prefix><key>`` → state text, `framework.windows.state`), and
in memory: the decoded states of the keys in use (every key's, up to `CACHED_KEYS`), so a
record reads nothing from the store; and a `DueIndex` of when each key has something due
(a window closes, a joined record expires), rebuilt from the store at start. Due times
scattered over event time (sessions, joined records) are handed out in steps of a
``granule``, so one close serves many keys.

Write-back: a record changes its key's state in memory and marks the key dirty; the
dirty keys' states are encoded and put when the task store is drained for a commit (or
read by range), through `TaskStore.before_drain` — once per key and commit, however many
records it had. Each commit thus carries every key's state as of that commit, exactly
what write-through would have left in the write buffer, and a restart restores it from
the changelog. A state JSON cannot hold then fails that commit, naming the key.

Closing is lazy in the store: a close writes ``a~closed`` (its bound) and deletes the
keys it emptied — at the next close, unless a record wrote the key again first — but
does not rewrite the others; whatever only the closed windows needed is dropped
whenever a state is read from the store (``open_part``). A key whose state never
reached the store (made and emptied between two flushes: most keys of short windows and
joins) is not deleted: its delete would only add a tombstone to the changelog.

Under the ``skip`` and ``dead-letter`` process policies a failed record's store writes
are undone behind these copies, so then nothing is cached, every record's state is
written at once, and the index is rebuilt from the store at every close. A store other
than a `TaskStore` (no drain to hook) is written at once too.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from typing import Any

from framework.api import KeyValueStore
from framework.stores.buffer import TaskStore
from framework.windows.kinds import WindowError
from framework.windows.state import DueIndex, dump_state, key_from_text, load_state

__all__ = ["CACHED_KEYS", "CLOSED_KEY", "KeyedStates"]

CACHED_KEYS = 200_000
"""Keys whose states are kept decoded in memory; past that, states are read from the
store (the least used are forgotten all at once)."""
CLOSED_KEY = "a~closed"

State = list[Any]
OpenPart = Callable[[State, int], "State | None"]
"""``(state, closed bound)`` → what is still open of a state read from the store."""
FirstDue = Callable[[State, int], int]
"""``(open state, closed bound)`` → when something of it is next due."""


class KeyedStates:
    """The states under ``prefix`` of ``store`` (see the module docstring)."""

    def __init__(self, store: KeyValueStore, prefix: str, open_part: OpenPart,
                 first_due: FirstDue, *, granule: int = 1, legacy: Iterable[str] = ()
                 ) -> None:
        self.store = store
        self.prefix = prefix
        self._open_part = open_part
        self.first_due = first_due
        """When something of an open state is next due (replaceable once the owner knows
        its layout)."""
        self.index = DueIndex(granule)
        self.max_cached = CACHED_KEYS
        """`CACHED_KEYS` as this instance was made."""
        self.cache: dict[str, State] = {}
        self.complete = False
        """`cache` holds every key with open state: a key missing there has none."""
        self.emptied: set[str] = set()
        """Keys the last close emptied (of those the store may hold), deleted at the next
        one unless written before."""
        self.closed: int = store.get(CLOSED_KEY) or -1
        """The bound of the last close."""
        self.dirty: set[str] = set()
        """Keys whose state changed since the last `flush` (write-back only)."""
        self.in_store: set[str] | None = None
        """Keys whose state is in the store (put and not deleted since), while states are
        written back and every key's is cached; None: not known (a key is then deleted
        as if it were)."""
        self.hot: dict[str, State] | None = None
        """`cache` while states are written back and it holds every open state (else
        None): a caller may read a state there (missing: none) and, having changed that
        list in place, only add its key to `dirty`; any other state goes to `save`."""
        self._cached: bool | None = None
        self._write_back = False
        self._legacy = tuple(legacy)
        if isinstance(store, TaskStore):
            store.before_drain(f"states {prefix}", self.flush)

    def stored(self) -> list[tuple[str, State]]:
        """Every key's state as the store has it (``(key text, state)``)."""
        n = len(self.prefix)
        return [(key[n:], load_state(value)) for key, value in self.store.prefix(self.prefix)]

    def rebuild(self, states: list[tuple[str, State]] | None = None) -> None:
        """Index (and cache) ``states`` (default: the store's); delete what is closed."""
        states = self.stored() if states is None else states
        self.index.clear()
        self.cache.clear()
        self.emptied.clear()
        self.complete = len(states) <= self.max_cached
        undecided = self._cached is None  # `cached` decides, at the first record
        self.in_store = set() if self.complete and (undecided or self._write_back) else None
        self._heat()
        gone = []
        for text, state in states:
            open_part = self._open_part(state, self.closed)
            if open_part:
                self.index.note(text, self.first_due(open_part, self.closed))
                if self.complete:
                    self.cache[text] = open_part
                    if self.in_store is not None:  # None under a journal: not known
                        self.in_store.add(text)
            else:
                gone.append(self.prefix + text)
        for prefix in self._legacy:
            gone += [key for key, _ in self.store.prefix(prefix)]
        for key in gone:
            self.store.delete(key)

    def cached(self) -> dict[str, State] | None:
        """The cache, or None under a journaling process policy (the worker sets the
        journal after `init`, so this is decided at the first record)."""
        if self._cached is None:
            store = self.store
            self._cached = not isinstance(store, TaskStore) or store.journal is None
            self._write_back = isinstance(store, TaskStore) and self._cached
            if not self._write_back:
                self.in_store = None  # written at once, maybe undone behind it: unknown
            self._heat()
        return self.cache if self._cached else None

    def _heat(self) -> None:
        self.hot = self.cache if self._write_back and self.complete else None

    def load(self, text: str) -> State | None:
        """Key ``text``'s open state (None: none)."""
        cache = self.cache if self._cached else self.cached()
        if cache is not None:
            state = cache.get(text)
            if state is not None or self.complete:
                return state
        stored = self.store.get(self.prefix + text)
        return None if stored is None else self._open_part(load_state(stored), self.closed)

    def save(self, text: str, state: State) -> None:
        """Set key ``text``'s (non-empty) state: in memory until the next `flush` (write-
        back), else in the store at once."""
        if self._write_back:
            cache = self.cache
            if text not in cache and len(cache) >= self.max_cached:
                self.flush()  # the dirty states are only in the cache
                cache.clear()
                self.complete = False
                self.in_store = None
                self._heat()
            cache[text] = state
            self.dirty.add(text)
        else:
            self.store.put(self.prefix + text, dump_state(state))
            cached = self.cached()
            if cached is not None:
                if text not in cached and len(cached) >= self.max_cached:
                    cached.clear()
                    self.complete = False
                cached[text] = state
        if self.emptied:
            self.emptied.discard(text)

    def flush(self) -> None:
        """Put the state of every key changed since the last flush into the store (what a
        close emptied since stays out: the next close deletes it)."""
        dirty = self.dirty
        if not dirty:
            return
        cache, put, prefix = self.cache, self.store.put, self.prefix
        stored = self.in_store
        for text in dirty:
            state = cache.get(text)
            if state:
                try:
                    text_state = dump_state(state)
                except WindowError as error:
                    raise WindowError(f"store {getattr(self.store, 'name', '?')!r}, key "
                                      f"{key_from_text(text)!r}: {error}") from None
                put(prefix + text, text_state)
                if stored is not None:
                    stored.add(text)
        dirty.clear()

    def _delete(self, texts: Iterable[str]) -> None:
        """Delete the states of ``texts`` from the store (those it holds, where known)."""
        delete, prefix, stored = self.store.delete, self.prefix, self.in_store
        if stored is None:
            for text in texts:
                delete(prefix + text)
            return
        for text in texts:
            if text in stored:
                stored.discard(text)
                delete(prefix + text)

    def start_close(self, bound: int) -> list[tuple[int, str]]:
        """The keys due at ``bound`` (`DueIndex.due`), after deleting the keys the last
        close emptied (no record wrote them since)."""
        if self.cached() is None:
            self.rebuild()
        self._delete(self.emptied)
        self.emptied.clear()
        return self.index.due(bound)

    def finish_close(self, bound: int, kept: list[tuple[str, State, int]],
                     gone: Iterable[str] = (), cuts: Sequence[int] = ()) -> None:
        """Record a close at ``bound`` after its results were sent: ``kept`` is what each
        key taken by `start_close` keeps open and when it is next due (``(key, remaining,
        due)``; remaining empty: nothing), ``gone`` the keys taken that keep nothing;
        ``cuts`` (empty, or one per kept row): how many leading items each kept state
        drops now, in place (`framework.windows.layouts.Cuts`)."""
        self.store.put(CLOSED_KEY, bound)
        self.closed = bound
        if cuts:
            for row, cut in zip(kept, cuts, strict=True):
                if cut:
                    del row[1][:cut]
        cache = self.cached()
        emptied = self.emptied
        # What remains goes into the cache (the store keeps the closed part until a
        # write) and is noted due; what keeps nothing is emptied here.
        for text, _, _ in self.index.note_kept(kept, cache):
            if cache is None:
                self._delete((text,))
            else:
                cache.pop(text, None)
                if self.in_store is None or text in self.in_store:
                    emptied.add(text)
        if cache is None:
            self._delete(gone)
        else:
            deque(map(cache.pop, gone, repeat(None)), 0)  # each one's `pop`, by a builtin pass
            stored = self.in_store  # a key the store does not hold needs no delete
            emptied.update(gone if stored is None else stored.intersection(gone))
        if not len(self.index):  # nothing open any more: no record is coming soon
            self._delete(emptied)
            emptied.clear()
