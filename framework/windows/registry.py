"""Which `Windows` aggregates each task store, for readers outside the task.

A store's open windows can only be decoded with the layout and reducer that wrote them,
which only the task's `Windows` knows; it registers itself here for its store when it is
made (a renewed task's replaces the old one's). The query endpoint, in the same worker
process, finds it by the store object (`framework.queries.windows`). Weak references: a
registration ends with its `Windows`.
"""

from __future__ import annotations

import weakref
from typing import Any

__all__ = ["register_windows", "windows_of"]

_BY_STORE: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
"""id(store) → the `Windows` over it (it holds the store, so the id stays its own)."""


def register_windows(store: object, windows: Any) -> None:
    """Note that ``windows`` (a `Windows`) aggregates in ``store``."""
    _BY_STORE[id(store)] = windows


def windows_of(store: object) -> Any | None:
    """The `Windows` registered for ``store`` (None: none, or it is gone)."""
    found = _BY_STORE.get(id(store))
    return found if found is not None and found.store is store else None
