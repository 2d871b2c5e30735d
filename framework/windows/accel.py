"""The C fold and close of the pane layout (`framework.windows._accel`), for the reducers
it knows: ``count()``, ``sum_of``, ``min_of``, ``max_of``, ``mean_of`` (``of`` None or a
field name) and an `aggregate` of them. Any other reducer — a `fold`, an ``of``
function — runs in Python, as does every reducer when the extension was not built (it
is optional: a machine without a C compiler installs sampan without it) or when
``SAMPAN_WINDOWS_ACCEL=0`` is set.

The C functions do what `Panes.fold` and `Panes.close_all` do with the reducers' Python
functions, object for object (tests/windows/test_accel.py compares them record by
record), so the choice changes speed only: the state lists, the store and the results
are the same.

>>> from framework.windows.reducers import aggregate, count, mean_of
>>> spec(count()), spec(aggregate(n=count(), avg=mean_of("amount")))
((True, 0, None), (False, 0, None, 4, 'amount'))
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

from framework.windows.reducers import Reducer

__all__ = ["ENV", "KINDS", "native", "spec"]

ENV = "SAMPAN_WINDOWS_ACCEL"
"""Set to ``0`` to run every reducer in Python (e.g. to compare the two)."""
KINDS = {"count": 0, "sum": 1, "min": 2, "max": 3, "mean": 4}
"""`Inline.kind` → the code `_accel.c` knows it by."""

Spec = tuple[Any, ...]
"""``(single, kind, of, kind, of, …)``: a reducer as `_accel.c` reads it."""


def _load() -> ModuleType | None:
    try:
        from framework.windows import _accel
    except ImportError:
        return None
    return _accel


_module = _load()


def native() -> ModuleType | None:
    """The extension module, or None: not built, or turned off by `ENV`."""
    return None if os.environ.get(ENV) == "0" else _module


def spec(reducer: Reducer) -> Spec | None:
    """``reducer`` as `_accel.c` reads it, or None when it cannot run there."""
    parts = [part for _, part in reducer.parts] if reducer.parts else [reducer]
    described: list[Any] = [not reducer.parts]
    for part in parts:
        inline = part.inline
        if inline is None or inline.kind not in KINDS or not (
                inline.of is None or isinstance(inline.of, str)):
            return None
        described += [KINDS[inline.kind], inline.of]
    return tuple(described)


def names(reducer: Reducer) -> tuple[str, ...]:
    """An `aggregate`'s result names, in order (empty for one reducer)."""
    return tuple(name for name, _ in reducer.parts)
