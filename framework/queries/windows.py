"""Reading a key's windows from a window store's committed state.

`framework.windows.Windows` keeps a key's open windows as one state (``k|<key text>`` →
state text, laid out per window kind: `framework.windows.layouts`) and closes lazily: the
store's ``a~closed`` bounds what was emitted, and a state may still hold parts only
emitted windows needed. Decoding needs the layout and reducer that wrote the state, which
the task's `Windows` registered for its store (`framework.windows.registry`). A read is
the engine's committed state (as `framework.queries.reads`): the key's state and the
close bound of the same commit, read without awaiting.

Only open windows are in a store: a closed window's final result went to the task's
output and left the store. An answer lists the key's open windows whose start is in
``[start, end)`` (either bound may be None), oldest first, each with the value the
reducer's result gives its aggregate so far (``final`` is never true here), and
``closed``: every window ending (sessions: closing) at or before it was emitted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from framework.queries.errors import NotQueryableError, TaskUnavailableError
from framework.queries.reads import position_of
from framework.stores.buffer import TaskStore
from framework.windows.aggregation import SHAPE_KEY, STATE
from framework.windows.keyed import CLOSED_KEY
from framework.windows.kinds import MAX_TIME
from framework.windows.registry import windows_of
from framework.windows.state import key_text, load_state

__all__ = ["OpenWindow", "OpenWindows", "read_windows"]

ALL_TIME = 2 * MAX_TIME + 1
"""A close bound past every window's end: what `split` emits at it is every window."""


@dataclass(frozen=True)
class OpenWindow:
    """One open window of a key: ``[start, end)`` and its result so far."""

    start: int
    end: int
    value: Any


@dataclass(frozen=True)
class OpenWindows:
    """A key's open windows in a time range, from one task's committed state."""

    windows: list[OpenWindow]
    closed: int | None
    """Every window ending at or before this was closed and left the store (None: none)."""
    position: int | None
    """The changelog offset the state reflects (as `framework.queries.reads.Found`)."""


def read_windows(store: TaskStore, key: Any, start: int | None, end: int | None,
                 retry_after_ms: int) -> OpenWindows:
    """``key``'s open windows in ``store`` starting in ``[start, end)`` (see the module)."""
    windows = windows_of(store)
    if windows is None:
        if store.engine.get(store._encode_key(SHAPE_KEY)) is not None:  # noqa: SLF001
            raise TaskUnavailableError(
                f"store {store.name!r} of task {store.task!r} holds windows, but its task has "
                f"not made its Windows yet (starting); retry after {retry_after_ms} ms",
                retry_after_ms)
        raise NotQueryableError(
            f"store {store.name!r} of task {store.task!r} holds no windows: only a store a "
            "task aggregates into with framework.windows.Windows answers /windows; use "
            "/get for its keys")
    position = position_of(store)
    closed = _committed(store, CLOSED_KEY)
    stored = _committed(store, STATE + key_text(key))
    if stored is None:
        return OpenWindows([], closed, position)
    bound = -1 if closed is None else int(closed)
    layout = windows.layout
    state = load_state(stored)
    i, width = 0, layout.width
    while i < len(state) and layout.needed_until(state, i) <= bound:
        i += width  # only windows already emitted needed this part
    emitted, _ = layout.split(state[i:], bound, ALL_TIME)
    finish = windows.reducer.result
    found = [OpenWindow(first, last, aggregate if finish is None else finish(aggregate))
             for first, last, aggregate in emitted
             if (start is None or first >= start)
             and (end is None or first < end)]
    return OpenWindows(found, closed, position)


def _committed(store: TaskStore, key: str) -> Any:
    """``key``'s value in the engine (the last commit applied), decoded; None: absent."""
    raw = store._encode_key(key)  # noqa: SLF001 - the store's own key encoding
    data = store.engine.get(raw)
    return None if data is None else store._decode_value(raw, data)  # noqa: SLF001
