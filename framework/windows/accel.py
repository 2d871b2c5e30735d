"""The C fold and close of the pane and session layouts, and a record's common step of
`Windows.process` (`framework.windows._accel`), for the reducers it knows: ``count()``,
``sum_of``, ``min_of``, ``max_of``, ``mean_of`` (``of`` None or a field name) and an
`aggregate` of them. Any other reducer — a `fold`, an ``of`` function — runs in Python,
as does every reducer when the extension was not built (it is optional: a machine
without a C compiler installs sampan without it) or when ``SAMPAN_WINDOWS_ACCEL=0`` is
set.

The C functions do what `Panes` and `Sessions` (``fold``, ``close_all``) and
`Windows.process` do with the reducers' Python functions, value for value
(tests/windows/test_accel.py compares them record by record), so the choice changes
speed only: the states' values, the store and the results are the same. (C changes some
lists in place where Python makes new ones, and shares the ints of recent times.)

>>> from framework.windows.reducers import aggregate, count, mean_of
>>> spec(count()), spec(aggregate(n=count(), avg=mean_of("amount")))
((True, 0, None), (False, 0, None, 4, 'amount'))
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from framework.windows.extension import ENV, native
from framework.windows.reducers import Reducer
from framework.windows.state import key_from_text

__all__ = ["ENV", "KINDS", "layout_calls", "names", "native", "spec"]

KINDS = {"count": 0, "sum": 1, "min": 2, "max": 3, "mean": 4}
"""`Inline.kind` → the code `_accel.c` knows it by."""

Spec = tuple[Any, ...]
"""``(single, kind, of, kind, of, …)``: a reducer as `_accel.c` reads it."""


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


CloseAll = Callable[..., tuple[list[Any], list[tuple[str, list[Any], int]], list[str]]]
"""A layout's ``close_all`` without its first arguments (see `layout_calls`)."""


def layout_calls(reducer: Reducer, layout: int, param: int, size: int,
                 general: Callable[..., Any] | None, close: Callable[..., Any] | None
                 ) -> tuple[Spec | None, Callable[..., Any] | None, CloseAll | None]:
    """(spec, fold, close_all) of a layout (0: panes of advance ``param`` and ``size``; 1:
    sessions of gap ``param``, ``general`` and ``close`` their Python fold and close) in
    C for ``reducer``, or (None, None, None) when it runs in Python."""
    module, described = native(), spec(reducer)
    if module is None or described is None:
        return None, None, None
    return (described, partial(module.fold, layout, param, described, general),
            partial(module.close_all, layout, param, size, described, names(reducer),
                    key_from_text, close))
