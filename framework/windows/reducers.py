"""Reducers: how a window folds its records' values into one aggregate.

An aggregate lives in the window store as JSON, so it must be numbers, strings, lists or
dicts. ``of`` picks what a reducer reads from a record's value: None (the value itself),
a field name, or a function of the value. `aggregate` runs several reducers over one
window in one pass and one store value; the window's result carries each by name.

>>> r = sum_of("amount")
>>> r.add(r.start({"amount": 2}), {"amount": 5})
7
>>> r.merge(7, 3)
10
>>> both = aggregate(views=count(), spent=sum_of("amount"), avg=mean_of("amount"))
>>> stored = both.add(both.start({"amount": 2}), {"amount": 5})
>>> stored, both.result(stored)
([2, 7, [7, 2]], {'views': 2, 'spent': 7, 'avg': 3.5})
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from framework.windows.kinds import WindowError

__all__ = ["Reducer", "aggregate", "count", "fold", "max_of", "mean_of", "min_of", "sum_of"]

Of = str | Callable[[Any], Any] | None

PURE_MERGES: set[Callable[[Any, Any], Any]] = {operator.add, min, max}
"""Merges (of the built-in reducers) that never change their arguments: a window
merging panes with one needs no copy of its first pane's aggregate."""


@dataclass(frozen=True)
class Reducer:
    """``start(value)`` makes a window's first aggregate, ``add(aggregate, value)`` folds in
    another record, ``merge(a, b)`` combines two aggregates (only session windows need it,
    when a record joins two sessions), ``result(aggregate)`` is what the window emits
    (None: the aggregate itself)."""

    name: str
    start: Callable[[Any], Any]
    add: Callable[[Any, Any], Any]
    merge: Callable[[Any, Any], Any] | None = None
    result: Callable[[Any], Any] | None = None
    inline: Inline | None = field(default=None, compare=False, repr=False)
    """A built-in reducer's expressions, which `aggregate` writes into one function each
    for start, add, merge and result instead of calling one function per reducer."""
    merge_all: Callable[[list[Any]], Any] | None = field(default=None, compare=False,
                                                         repr=False)
    """``merge`` over a list of two or more aggregates, left to right, in one call (what
    ``functools.reduce(merge, aggregates)`` returns); None: use that."""
    merge_result: Callable[[list[Any]], Any] | None = field(default=None, compare=False,
                                                            repr=False)
    """``result(merge_all(aggregates))`` in one call, for built-in reducers and their
    `aggregate`, whose aggregates are never changed in place; None: not known."""
    parts: tuple[tuple[str, Reducer], ...] = field(default=(), compare=False, repr=False)
    """An `aggregate`'s reducers by name (empty for any other reducer)."""


@dataclass(frozen=True)
class Inline:
    """Python expressions equal to a built-in reducer's functions: ``{x}`` stands for
    what it reads of a value (``of``), ``{a}`` and ``{b}`` for aggregates."""

    start: str
    add: str
    merge: str
    result: str | None
    of: Of
    columns: int = 0
    """The aggregate is a list of this many numbers, merged by adding column by column
    (``merge`` says the same): merged over many panes in that many locals."""
    kind: str = ""
    """Which built-in it is (``count``, ``sum``, ``min``, ``max``, ``mean``): what
    `framework.windows.layouts.Columns` keeps inline."""


def _getter(of: Of) -> Callable[[Any], Any]:
    if of is None:
        return lambda value: value
    if isinstance(of, str):
        return operator.itemgetter(of)
    return of


def count() -> Reducer:
    """The number of records in the window."""
    return _with_merge_all(Reducer(
        "count", lambda value: 1, lambda total, value: total + 1, operator.add,
        inline=Inline("1", "{a} + 1", "{a} + {b}", None, None, kind="count")))


def sum_of(of: Of = None) -> Reducer:
    """The sum of ``of`` over the window's records."""
    get = _getter(of)
    return _with_merge_all(Reducer(
        "sum", get, lambda total, value: total + get(value), operator.add,
        inline=Inline("{x}", "{a} + {x}", "{a} + {b}", None, of, kind="sum")))


def min_of(of: Of = None) -> Reducer:
    """The least ``of`` among the window's records."""
    get = _getter(of)
    return _with_merge_all(Reducer(
        "min", get, lambda low, value: min(low, get(value)), min,
        inline=Inline("{x}", "min({a}, {x})", "min({a}, {b})", None, of, kind="min")))


def max_of(of: Of = None) -> Reducer:
    """The greatest ``of`` among the window's records."""
    get = _getter(of)
    return _with_merge_all(Reducer(
        "max", get, lambda high, value: max(high, get(value)), max,
        inline=Inline("{x}", "max({a}, {x})", "max({a}, {b})", None, of, kind="max")))


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


def mean_of(of: Of = None) -> Reducer:
    """The mean of ``of`` over the window's records (kept as ``[sum, count]``)."""
    get = _getter(of)
    return _with_merge_all(Reducer(
        "mean", lambda value: [get(value), 1],
        lambda acc, value: [acc[0] + get(value), acc[1] + 1],
        _merge_means, lambda acc: acc[0] / acc[1],
        inline=Inline("[{x}, 1]", "[{a}[0] + {x}, {a}[1] + 1]",
                      "[{a}[0] + {b}[0], {a}[1] + {b}[1]]", "{a}[0] / {a}[1]", of,
                      columns=2, kind="mean")))


def _merge_means(a: list[Any], b: list[Any]) -> list[Any]:
    return [a[0] + b[0], a[1] + b[1]]


PURE_MERGES.add(_merge_means)


def _with_merge_all(reducer: Reducer) -> Reducer:
    """``reducer`` with a `Reducer.merge_all` and a `Reducer.merge_result` written from
    its inline merge and result.

    >>> count().merge_all([1, 2, 4]), mean_of().merge_all([[3, 1], [5, 2]])
    (7, [8, 3])
    >>> mean_of().merge_result([[3, 1], [5, 2], [1, 1]])
    2.25
    """
    assert reducer.inline is not None
    merge_all, merge_result = _aggregate_merge_all([reducer.inline], single=True)
    return replace(reducer, merge_all=merge_all, merge_result=merge_result)


def _compile_merge_all(lines: list[str]) -> Callable[[list[Any]], Any]:
    """``def merge_all(P)`` with ``lines`` as its body."""
    scope: dict[str, Any] = {"min": min, "max": max}
    body = "".join(f"\n    {line}" for line in lines)
    exec(compile(f"def merge_all(P):{body}\n", "<merge_all>", "exec"), scope)
    return scope["merge_all"]  # type: ignore[no-any-return]


def aggregate(**reducers: Reducer) -> Reducer:
    """Several reducers over the same windows, in one pass and one stored aggregate (a
    list, one entry per reducer); a window's result is ``{name: result}``.

    Session windows need every reducer to have a merge. Changing the reducers of a store
    that still holds open windows is refused when the task starts (see `Windows`).

    >>> stats = aggregate(n=count(), top=max_of("x"))
    >>> stats.name
    'aggregate(n=count, top=max)'
    >>> stats.result(stats.add(stats.start({"x": 4}), {"x": 9}))
    {'n': 2, 'top': 9}
    """
    if not reducers:
        raise WindowError("aggregate() needs at least one named reducer, e.g. "
                          "aggregate(views=count(), spent=sum_of(\"amount\"))")
    for name, reducer in reducers.items():
        if not isinstance(reducer, Reducer):
            raise WindowError(f"aggregate(): {name}= must be a reducer such as count() or "
                              f"sum_of(...), got {reducer!r}")
    names = tuple(reducers)
    parts = tuple(reducers.values())
    merges = tuple(r.merge for r in parts)
    start, add, merge, result = _compiled(names, parts)
    if all(m in PURE_MERGES for m in merges):
        PURE_MERGES.add(merge)
    label = ", ".join(f"{name}={r.name}" for name, r in reducers.items())
    inlines = [r.inline for r in parts]
    merge_all, merge_result = _aggregate_merge_all(
        [i for i in inlines if i is not None], names) if all(inlines) else (None, None)
    return Reducer(f"aggregate({label})", start, add,
                   merge if all(m is not None for m in merges) else None, result,
                   merge_all=merge_all, merge_result=merge_result,
                   parts=tuple(reducers.items()))


def _aggregate_merge_all(inlines: list[Inline], names: tuple[str, ...] = (), *,
                         single: bool = False
                         ) -> tuple[Callable[[list[Any]], Any], Callable[[list[Any]], Any]]:
    """`Reducer.merge_all` and `Reducer.merge_result` of built-in reducers (their inline
    merges and results) — of one (``single``) or of their `aggregate` by ``names``: one
    accumulator per reducer (per column, for a list of numbers), one value at the end.
    Built-in merges have no side effects, so merging each reducer's column in turn
    equals merging pane by pane, and the additions are the same, in the same order.

    >>> merge_all, merge_result = _aggregate_merge_all(
    ...     [count().inline, max_of().inline, mean_of().inline], ("n", "top", "avg"))
    >>> panes = [[1, 5, [5, 1]], [2, 9, [10, 2]], [3, 4, [9, 3]]]
    >>> merge_all(panes), merge_result(panes)
    ([6, 9, [24, 6]], {'n': 6, 'top': 9, 'avg': 4.0})
    """
    first, merged, values, results = [], [], [], []
    for i, inline in enumerate(inlines):
        column = "P[0]" if single else f"P[0][{i}]"
        pane = "B" if single else f"B[{i}]"
        if inline.columns:
            parts = [f"a{i}_{c}" for c in range(inline.columns)]
            first += [f"{part} = {column}[{c}]" for c, part in enumerate(parts)]
            merged += [f"    {part} = {part} + {pane}[{c}]" for c, part in enumerate(parts)]
            values.append(f"[{', '.join(parts)}]")
            result = inline.result.format(a="\0") if inline.result else values[-1]
            for c, part in enumerate(parts):  # "{a}[0] / {a}[1]": the locals themselves
                result = result.replace(f"\0[{c}]", part)
            results.append(result.replace("\0", f"({values[-1]})"))
        else:
            first.append(f"a{i} = {column}")
            merged.append(f"    a{i} = {inline.merge.format(a=f'a{i}', b=pane)}")
            values.append(f"a{i}")
            results.append(f"a{i}" if inline.result is None else inline.result.format(a=f"a{i}"))
    body = [*first, "for B in P[1:]:", *merged]
    if single:
        return (_compile_merge_all([*body, f"return {values[0]}"]),
                _compile_merge_all([*body, f"return {results[0]}"]))
    fields = ", ".join(f"{name!r}: {r}" for name, r in zip(names, results, strict=True))
    return (_compile_merge_all([*body, f"return [{', '.join(values)}]"]),
            _compile_merge_all([*body, f"return {{{fields}}}"]))


def _compiled(names: tuple[str, ...], parts: tuple[Reducer, ...]) -> tuple[Any, Any, Any, Any]:
    """`aggregate`'s start, add, merge and result as one function each: a built-in
    reducer's part is its `Inline` expression, any other a call of its function, so a
    record costs one Python call for all the reducers (the same results, in the same
    order of evaluation, as calling each reducer's functions in turn).

    >>> start, add, merge, result = _compiled(("n", "m"), (count(), max_of("x")))
    >>> a = add(start({"x": 4}), {"x": 9}); a, merge(a, [1, 11]), result(a)
    ([2, 9], [3, 11], {'n': 2, 'm': 9})
    """
    scope: dict[str, Any] = {"min": min, "max": max}
    starts, adds, merges, results = [], [], [], []
    for i, reducer in enumerate(parts):
        a, b = f"A[{i}]", f"B[{i}]"
        inline = reducer.inline
        if inline is None:
            scope.update({f"s{i}": reducer.start, f"f{i}": reducer.add,
                          f"m{i}": reducer.merge, f"r{i}": reducer.result})
            starts.append(f"s{i}(v)")
            adds.append(f"f{i}({a}, v)")
            merges.append(f"m{i}({a}, {b})")
            results.append(a if reducer.result is None else f"r{i}({a})")
            continue
        if inline.of is None:
            x = "v"
        elif isinstance(inline.of, str):
            x = f"v[{inline.of!r}]"
        else:
            scope[f"g{i}"] = inline.of
            x = f"g{i}(v)"
        starts.append(inline.start.format(x=x))
        adds.append(inline.add.format(x=x, a=a))
        merges.append(inline.merge.format(a=a, b=b))
        results.append(a if inline.result is None else inline.result.format(a=a))
    fields = ", ".join(f"{name!r}: {r}" for name, r in zip(names, results, strict=True))
    source = "\n".join([f"def start(v): return [{', '.join(starts)}]",
                        f"def add(A, v): return [{', '.join(adds)}]",
                        f"def merge(A, B): return [{', '.join(merges)}]",
                        f"def result(A): return {{{fields}}}", ""])
    exec(compile(source, "<aggregate>", "exec"), scope)
    return scope["start"], scope["add"], scope["merge"], scope["result"]
