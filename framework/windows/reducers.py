"""Reducers: how a window folds its records' values into one aggregate.

An aggregate lives in the window store, so it must survive the store's value serde (JSON
by default: numbers, strings, lists, dicts). ``of`` picks what a reducer reads from a
record's value: None (the value itself), a field name, or a function of the value.

>>> r = sum_of("amount")
>>> r.add(r.start({"amount": 2}), {"amount": 5})
7
>>> r.merge(7, 3)
10
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Reducer", "count", "fold", "max_of", "min_of", "sum_of"]

Of = str | Callable[[Any], Any] | None


@dataclass(frozen=True)
class Reducer:
    """``start(value)`` makes a window's first aggregate, ``add(aggregate, value)`` folds in
    another record, ``merge(a, b)`` combines two aggregates (only session windows need it,
    when a record joins two sessions)."""

    name: str
    start: Callable[[Any], Any]
    add: Callable[[Any, Any], Any]
    merge: Callable[[Any, Any], Any] | None = None


def _getter(of: Of) -> Callable[[Any], Any]:
    if of is None:
        return lambda value: value
    if isinstance(of, str):
        return operator.itemgetter(of)
    return of


def count() -> Reducer:
    """The number of records in the window."""
    return Reducer("count", lambda value: 1, lambda total, value: total + 1, operator.add)


def sum_of(of: Of = None) -> Reducer:
    """The sum of ``of`` over the window's records."""
    get = _getter(of)
    return Reducer("sum", get, lambda total, value: total + get(value), operator.add)


def min_of(of: Of = None) -> Reducer:
    """The least ``of`` among the window's records."""
    get = _getter(of)
    return Reducer("min", get, lambda low, value: min(low, get(value)), min)


def max_of(of: Of = None) -> Reducer:
    """The greatest ``of`` among the window's records."""
    get = _getter(of)
    return Reducer("max", get, lambda high, value: max(high, get(value)), max)


def fold(initial: Any, add: Callable[[Any, Any], Any],
         merge: Callable[[Any, Any], Any] | None = None, *, name: str = "fold") -> Reducer:
    """A custom fold: each window starts from a copy of ``initial`` and applies
    ``add(aggregate, value)`` per record (``add`` may mutate and must return the aggregate).

    >>> pages = fold([], lambda seen, v: sorted({*seen, v["page"]}),
    ...              merge=lambda a, b: sorted({*a, *b}))
    >>> pages.add(pages.start({"page": "/b"}), {"page": "/a"})
    ['/a', '/b']
    """
    return Reducer(name, lambda value: add(copy.deepcopy(initial), value), add, merge)
