"""The one-call paths of a close equal what they replace: `merge_all` merges like
`functools.reduce` over `merge`, and a layout's `close` splits like `split` and says
when the rest is due as `first_close` does."""

from __future__ import annotations

import copy
from functools import reduce
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from framework.windows import Hopping, Session, Tumbling, count, max_of, mean_of, min_of, sum_of
from framework.windows.layouts import Panes, PerWindow, Sessions, _close_each, _close_grid
from framework.windows.reducers import Reducer, aggregate
from framework.windows.state import key_from_text

numbers = st.one_of(st.integers(-10**6, 10**6), st.sampled_from([0.0, -0.0, 0.1, 1e16, -2.5]),
                    st.floats(allow_nan=False, allow_infinity=False, width=32))
BUILT_INS = {"count": count(), "sum": sum_of(), "min": min_of(), "max": max_of(),
             "mean": mean_of()}
EVERY = aggregate(**BUILT_INS)


def aggregates(reducer: Reducer, groups: list[list[Any]]) -> list[Any]:
    """One aggregate per non-empty group of values, as the reducer folds them."""
    return [reduce(reducer.add, group[1:], reducer.start(group[0])) for group in groups]


@settings(max_examples=100, deadline=None)
@given(groups=st.lists(st.lists(numbers, min_size=1, max_size=4), min_size=2, max_size=7))
def test_merge_all_of_each_built_in_and_of_their_aggregate_equals_merging_one_by_one(
        groups: list[list[Any]]) -> None:
    for reducer in (*BUILT_INS.values(), EVERY):
        panes = aggregates(reducer, groups)
        assert reducer.merge is not None and reducer.merge_all is not None
        assert repr(reducer.merge_all(panes)) == repr(reduce(reducer.merge, panes))
        finish = reducer.result or (lambda a: a)
        assert reducer.merge_result is not None
        assert repr(reducer.merge_result(panes)) == repr(finish(reduce(reducer.merge, panes)))


@settings(max_examples=100, deadline=None)
@given(groups=st.lists(st.lists(numbers, min_size=1, max_size=4), min_size=1, max_size=7),
       before=st.integers(0, 2))
def test_a_lone_built_in_in_panes_merges_a_window_over_the_state_as_merge_result_does(
        groups: list[list[Any]], before: int) -> None:
    """`Panes`' close merges a window of a lone count, sum, min or max over the state's
    panes in place (no list per window): the same result as `Reducer.merge_result` of
    the panes' aggregates, or the one pane's aggregate."""
    for name in ("count", "sum", "min", "max"):
        reducer = BUILT_INS[name]
        layout = Panes(Hopping(size_ms=30, advance_ms=10), reducer)
        panes = aggregates(reducer, groups)
        state = [at for i, aggregate in enumerate([0] * before + panes)
                 for at in (i * 10, aggregate)]
        low, high = 2 * before, len(state)
        assert reducer.merge_result is not None
        wanted = panes[0] if len(panes) == 1 else reducer.merge_result(panes)
        assert repr(layout._value(state, low, high)) == repr(wanted), name


@settings(max_examples=100, deadline=None)
@given(groups=st.lists(st.lists(numbers, min_size=1, max_size=4), min_size=1, max_size=7),
       skips=st.lists(st.integers(0, 3), min_size=7, max_size=7))
def test_a_hopping_count_or_sum_adds_its_panes_as_it_walks_them_to_the_bit(
        groups: list[list[Any]], skips: list[int]) -> None:
    """`_close_grid` adds up the panes of a lone count or sum as it walks a window's panes
    (``adds``): every window gets what the reducer's merge of those panes gives, floats
    included (the same additions in the same order); other reducers keep the merge."""
    for several in (EVERY, aggregate(n=count())):  # even of one count: a dict per window
        assert not Panes(Hopping(size_ms=30, advance_ms=10), several)._adds
    for name, reducer in BUILT_INS.items():
        layout = Panes(Hopping(size_ms=30, advance_ms=10), reducer)
        assert layout._adds == (name in ("count", "sum")), name
        if not layout._adds:
            continue
        starts = [10 * (n + sum(skips[:n + 1])) for n in range(len(groups))]  # some gaps
        state = [x for at, aggregate in zip(starts, aggregates(reducer, groups), strict=True)
                 for x in (at, aggregate)]
        states = {"sk": state}.get
        bound = starts[-1] + 40  # every window of every pane ends by then
        walked = _close_grid([(0, "sk")], states, -1, bound, tuple, 30, 10, 2,
                             layout._value, None, True)
        merged = _close_grid([(0, "sk")], states, -1, bound, tuple, 30, 10, 2,
                             layout._value, None, False)
        assert repr(walked) == repr(merged), name
        assert {r[1] for r in walked[0]} >= {at - 20 for at in starts if at >= 20}


def test_merge_all_leaves_its_aggregates_as_they_were() -> None:
    panes = [[1, 2, 2, 2, [2, 1]], [1, 5, 5, 5, [5, 1]], [2, 7, 3, 4, [7, 2]]]
    assert EVERY.merge_all is not None
    assert EVERY.merge_all(panes) == [4, 14, 2, 5, [14, 4]]
    assert panes == [[1, 2, 2, 2, [2, 1]], [1, 5, 5, 5, [5, 1]], [2, 7, 3, 4, [7, 2]]]


def test_an_aggregate_with_a_reducer_of_its_own_merges_one_by_one() -> None:
    assert aggregate(n=count(), top=max_of()).merge_all is not None
    assert aggregate(n=count(), own=Reducer("own", int, max, max)).merge_all is None


LAYOUTS = [Panes(Tumbling(size_ms=10), count()), Panes(Hopping(size_ms=30, advance_ms=10),
           EVERY), PerWindow(Hopping(size_ms=25, advance_ms=10), count()),
           Sessions(Session(gap_ms=7), count()),
           Panes(Hopping(size_ms=30, advance_ms=10), count()),  # panes added up as walked
           Panes(Hopping(size_ms=30, advance_ms=10), sum_of())]


def expected_close(layout: Any, state: list[Any], closed: int, bound: int
                   ) -> tuple[list[Any], list[Any]]:
    """What a close at ``bound`` emits and leaves, from the layouts' definitions."""
    if isinstance(layout, Sessions):
        entries = [state[i:i + 3] for i in range(0, len(state), 3)]
        done = [e for e in entries if e[1] + layout.gap + 1 <= bound]
        return ([(first, last + 1, a) for first, last, a in done],
                [x for e in entries if e not in done for x in e])
    entries = [state[i:i + 2] for i in range(0, len(state), 2)]
    left = [x for start, a in entries if start + layout.size > bound for x in (start, a)]
    if isinstance(layout, PerWindow):
        return ([(start, start + layout.size, a) for start, a in entries
                 if start + layout.size <= bound], left)
    return layout.windows(state, closed, bound), left


@settings(max_examples=300, deadline=None)
@given(times=st.lists(st.integers(0, 200), min_size=1, max_size=12),
       closed=st.integers(-1, 150), ahead=st.integers(0, 80), which=st.integers(0, 3))
def test_close_emits_and_leaves_what_the_layout_defines_due_when_first_close_says(
        times: list[int], closed: int, ahead: int, which: int) -> None:
    """``ahead`` 0: the close runs exactly when the first window is due."""
    layout: Any = LAYOUTS[which]
    state = None
    for ts in sorted(times) if which < 3 else times:
        state, _ = layout.fold(state, ts, ts)
    assert state is not None
    if isinstance(layout, Panes | PerWindow):  # what a close at ``closed`` left
        state = [x for i in range(0, len(state), 2) if state[i] + layout.size > closed
                 for x in state[i:i + 2]]
    else:
        state = [x for i in range(0, len(state), 3)
                 if state[i + 1] + layout.gap + 1 > closed for x in state[i:i + 3]]
    if not state:
        return
    bound = closed + ahead if ahead else layout.first_close(state, closed)
    emitted, remaining, due = layout.close(list(state), closed, bound)
    assert (emitted, remaining) == expected_close(layout, state, closed, bound)
    assert (emitted, remaining) == layout.split(list(state), closed, bound)
    assert due == (layout.first_close(remaining, bound) if remaining else 0)


@settings(max_examples=400, deadline=None)
@given(states=st.lists(st.lists(st.integers(0, 60), min_size=0, max_size=8), min_size=1,
                       max_size=5),
       closed=st.integers(-1, 40), ahead=st.one_of(st.integers(-1, 1), st.integers(2, 40)),
       which=st.integers(0, len(LAYOUTS) - 1),
       finish=st.integers(0, 2), trim=st.booleans(), cut=st.booleans())
@example(states=[[5]], closed=10, ahead=5, which=0, finish=0, trim=False, cut=False)
@example(states=[[50]], closed=-1, ahead=-1, which=3, finish=0, trim=True, cut=True)
@example(states=[[3, 15, 24, 33]], closed=-1, ahead=6, which=1, finish=2, trim=False,
         cut=True)  # keeps panes after the windows it emits
def test_close_all_equals_close_key_by_key(states: list[list[int]], closed: int, ahead: int,
                                           which: int, finish: int, trim: bool,
                                           cut: bool) -> None:
    """A layout's one-call `close_all` emits, keeps and drops what `close` says per key,
    also for states that still hold closed windows (read from the store before a trim);
    ``ahead`` -1, 0, 1: the close runs around the first key's first closing time;
    ``finish`` 2: the reducer's own result (`Reducer.merge_result` for merged panes);
    ``cut``: told to keep states uncut (`layouts.Cuts`), it changes no state and says
    what each kept one drops, or copies them all."""
    layout: Any = LAYOUTS[which]
    stored: dict[str, list[Any] | None] = {}
    for n, times in enumerate(states):
        state = None
        sessions = isinstance(layout, Sessions)
        for ts in times if sessions else sorted(times):
            state, _ = layout.fold(state, ts, ts)
        if state is not None and trim:  # what a close at ``closed`` left
            width = 3 if sessions else 2
            state = [x for i in range(0, len(state), width)
                     if layout.needed_until(state, i) > closed for x in state[i:i + width]]
        stored["s" + "abcde"[n] if n % 2 else "j" + str(n)] = state or None
    taken = [(0, text) for text in stored]
    result = [None, lambda a: ("done", a), getattr(layout, "finish", None)][finish]
    first = next((state for state in stored.values() if state), None)
    bound = closed + ahead if ahead > 1 or first is None else max(
        closed + 1, layout.first_close(first, closed) + ahead)
    before = copy.deepcopy(stored)  # the C close trims the states it keeps in place
    want = _close_each(layout, taken, before.get, closed, bound, result, tuple)
    cuts: list[int] | None = [] if cut else None
    got = layout.close_all(taken, stored.get, closed, bound, result, tuple, cuts)
    if cuts:
        assert stored == before
        assert all(state is stored[text] for (text, state, _), n  # what drops is cut
                   in zip(got[1], cuts, strict=True) if n)
        got = (got[0], [(text, state[n:], due) for (text, state, due), n
                        in zip(got[1], cuts, strict=True)], got[2])
    assert got == want
    results, kept, gone = want
    for text in before:
        emitted, remaining, due = layout.close(list(before[text] or []), closed, bound)
        assert [r[1:4] for r in results if r[0] == key_from_text(text)] == [
            (start, end, result(a) if result else a) for start, end, a in emitted]
        assert ((text, remaining, due) in kept) == bool(remaining)
        assert (text in gone) == (not remaining)
