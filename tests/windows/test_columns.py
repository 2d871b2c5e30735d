"""`Columns` (a mean's or an aggregate's panes with their numbers inline) emits what
`Panes` emits for the same records: every result, every kept pane (read back as `Panes`
keeps it) and every gone key of every close; its states are one list per key, changed in
place by a record."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wtasks import close_layouts, replay

from framework.windows import (
    Hopping,
    Tumbling,
    WindowResult,
    count,
    fold,
    max_of,
    mean_of,
    min_of,
    sum_of,
)
from framework.windows.kinds import WindowKind
from framework.windows.layouts import Columns, Panes, columns_fit, layout_for
from framework.windows.reducers import Reducer, aggregate

REDUCERS = {
    "every built-in": aggregate(n=count(), total=sum_of("x"), low=min_of("x"),
                                high=max_of("x"), avg=mean_of("x")),
    "mean": mean_of("x"),
    "means first": aggregate(avg=mean_of("x"), again=mean_of("x"), n=count()),
    "two fields": aggregate(low=min_of("y"), total=sum_of("x"), high=max_of("y"),
                            avg=mean_of("x")),
}
KINDS: dict[str, WindowKind] = {
    "tumbling": Tumbling(size_ms=100),
    "hopping": Hopping(size_ms=300, advance_ms=100),
    "hopping by 7": Hopping(size_ms=21, advance_ms=7),
}
# Ties of equal numbers of other types (2 and 2.0, 0 and -0.0) and NaN: a min or max
# keeps the one it had, as the builtins do.
amounts = st.one_of(st.sampled_from([2, 2.0, -1, 0, -0.0, 0.5, 2**70, 2**63 - 1, True,
                                     float("nan")]),
                    st.floats(allow_nan=False, allow_infinity=False, width=32))
records = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 900), amounts),
                   min_size=1, max_size=60)


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (1 and 1.0 differ)."""
    return repr(a) == repr(b)


def layouts(kind: WindowKind, reducer: Reducer) -> list[Any]:
    """Columns, and Panes (as before columns)."""
    columns = layout_for(kind, reducer, None)
    panes = layout_for(kind, reducer, "panes")
    assert isinstance(columns, Columns) and isinstance(panes, Panes)
    return [columns, panes]


def as_panes(layout: Any, state: Any) -> Any:
    return layout.nested(state) if isinstance(layout, Columns) else state


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("reducer", list(REDUCERS))
@settings(max_examples=40, deadline=None)
@given(stream=records, every=st.integers(1, 12), grace=st.integers(0, 400),
       step=st.integers(1, 9))
def test_columns_emit_and_keep_what_panes_do(kind: str, reducer: str,
                                             stream: list[tuple[str, int, Any]], every: int,
                                             grace: int, step: int) -> None:
    both = layouts(KINDS[kind], REDUCERS[reducer])
    states: list[dict[str, Any]] = [{}, {}]

    def close(closed: int, bound: int) -> None:
        seen = close_layouts(both, states, closed, bound, as_panes, cut_first=True)
        assert same(seen[0], seen[1]), (closed, bound)

    def fold(n: int) -> None:
        key, ts, amount = stream[n]
        text = "s" + key
        folded = [layout.fold(held.get(text), {"x": amount, "y": -amount}, ts)
                  for layout, held in zip(both, states, strict=True)]
        assert same(as_panes(both[0], folded[0][0]), folded[1][0])
        assert folded[0][1] == folded[1][1]  # an older pane than it had: the same
        for held, (state, _) in zip(states, folded, strict=True):
            held[text] = state
        assert same(both[0].touched(states[0][text], ts),  # emit="update"'s view
                    both[1].touched(states[1][text], ts))

    replay([ts for _, ts, _ in stream], every, grace, step, fold, close)
    assert states == [{}, {}]


@pytest.mark.parametrize("kind", list(KINDS))
@settings(max_examples=60, deadline=None)
@given(times=st.lists(st.integers(0, 400), min_size=1, max_size=12),
       closed=st.integers(-1, 300), ahead=st.integers(0, 200))
def test_a_columns_close_and_split_are_the_panes_close_and_split(
        kind: str, times: list[int], closed: int, ahead: int) -> None:
    """`close` and `split` of one state (each pane's first ts its amount)."""
    columns, panes = layouts(KINDS[kind], REDUCERS["every built-in"])
    state = None
    for ts in times:
        state, _ = columns.fold(state, {"x": ts}, ts)
    assert state is not None
    bound = closed + ahead
    emitted, remaining, due = panes.close(columns.nested(state), closed, bound)
    closed_here = columns.close(list(state), closed, bound)
    assert same((closed_here[0], columns.nested(closed_here[1]), closed_here[2]),
                (emitted, remaining, due))
    assert same(columns.split(list(state), closed, bound)[0], emitted)
    assert columns.first_close(state, closed) == panes.first_close(columns.nested(state),
                                                                   closed)


def test_columns_change_one_list_in_place_and_results_do_not_change_after() -> None:
    """A record into an existing pane changes its numbers in the key's list, a new pane
    goes into the same list, and the results a close gave do not change with later
    records into the panes it kept."""
    layout = layout_for(KINDS["hopping"], REDUCERS["every built-in"], None)
    assert isinstance(layout, Columns)
    state = layout.fold(None, {"x": 2}, 1_010)[0]
    assert layout.fold(state, {"x": 3}, 1_020) == (state, False)
    assert state == [1_000, 2, 5, 2, 3, 5, 2]
    assert layout.fold(state, {"x": 4}, 1_110) == (state, False)  # a newer pane
    assert layout.fold(state, {"x": 1}, 910) == (state, True)  # an older one
    assert state == [900, 1, 1, 1, 1, 1, 1, 1_000, 2, 5, 2, 3, 5, 2,
                     1_100, 1, 4, 4, 4, 4, 1]
    results, kept, gone = layout.close_all([(0, "sa")], {"sa": state}.get, -1, 1_300,
                                           layout.finish, WindowResult)
    assert kept == [("sa", [1_100, 1, 4, 4, 4, 4, 1], 1_400)] and gone == []
    assert [(r.start, r.end, r.value) for r in results] == [
        (700, 1_000, {"n": 1, "total": 1, "low": 1, "high": 1, "avg": 1.0}),
        (800, 1_100, {"n": 3, "total": 6, "low": 1, "high": 3, "avg": 2.0}),
        (900, 1_200, {"n": 4, "total": 10, "low": 1, "high": 4, "avg": 2.5}),
        (1_000, 1_300, {"n": 3, "total": 9, "low": 2, "high": 4, "avg": 3.0})]
    shown = repr(results)
    for ts in (1_120, 1_130):
        layout.fold(kept[0][1], {"x": 9}, ts)
    assert repr(results) == shown


def test_a_bad_record_raises_and_leaves_the_state_as_it_was() -> None:
    """Every new value of a pane is computed before any is written: a record the reducers
    cannot read (a missing field, a value that is not a dict, one they cannot add)
    raises and changes nothing: into the newest pane, an older one, a new older one and
    a new newest one."""
    layout = layout_for(KINDS["hopping"], REDUCERS["every built-in"], None)
    for ts, new in ((1_110, False), (1_010, False), (910, True), (1_210, True)):
        state = layout.fold(layout.fold(None, {"x": 1}, 1_000)[0], {"x": 2}, 1_100)[0]
        before = repr(state)
        bad = [({"y": 1}, KeyError), (None, TypeError)]
        if not new:  # a new pane starts from the value: only an add fails on text
            bad.append(({"x": "text"}, TypeError))
        for value, error in bad:
            with pytest.raises(error):
                layout.fold(state, value, ts)
            assert repr(state) == before


def test_a_failed_close_leaves_every_state_as_it_was() -> None:
    """A close whose later key fails (its mean cannot be a float) has changed no state:
    the keys closed before it keep every pane, so the close can run again."""
    layout = layout_for(KINDS["hopping"], REDUCERS["every built-in"], None)
    held: dict[str, Any] = {}
    for text, amount in (("sa", 1), ("sb", 10**400)):
        for ts in (10, 150, 250, 350):
            held[text] = layout.fold(held.get(text), {"x": amount}, ts)[0]
    before = repr(held)
    with pytest.raises(OverflowError):
        layout.close_all([(0, "sa"), (0, "sb")], held.get, -1, 300, layout.finish,
                         WindowResult)
    assert repr(held) == before
    del held["sb"]
    results, kept, _ = layout.close_all([(0, "sa")], held.get, -1, 300, layout.finish,
                                        WindowResult)
    assert [(r.start, r.end) for r in results] == [(0, 300)]
    assert [(text, layout.nested(state), due) for text, state, due in kept] == [
        ("sa", [100, [1, 1, 1, 1, [1, 1]], 200, [1, 1, 1, 1, [1, 1]],
                300, [1, 1, 1, 1, [1, 1]]], 400)]


def test_which_reducers_are_kept_in_columns() -> None:
    """A mean and an aggregate of built-ins reading the value or a field; a lone count,
    sum, min or max is one column already (panes keep it just so); anything with a
    function of its own stays in panes."""
    assert columns_fit(mean_of()) and columns_fit(mean_of("x"))
    assert columns_fit(aggregate(n=count(), top=max_of("x")))
    assert columns_fit(aggregate(**{f"n{i}": count() for i in range(32)}))
    assert not columns_fit(aggregate(**{f"n{i}": count() for i in range(33)}))
    assert not any(columns_fit(r) for r in (count(), sum_of("x"), min_of(), max_of("x")))
    assert not columns_fit(mean_of(lambda v: v["x"]))
    assert not columns_fit(aggregate(n=count(), own=fold(0, max, max)))
    assert not columns_fit(aggregate(n=count(), top=max_of(lambda v: v)))
    hopping = KINDS["hopping"]
    assert isinstance(layout_for(hopping, aggregate(n=count()), None), Columns)
    assert isinstance(layout_for(hopping, aggregate(n=count()), "columns"), Columns)
    assert isinstance(layout_for(hopping, aggregate(n=count()), "panes"), Panes)
    assert isinstance(layout_for(hopping, count(), None), Panes)
