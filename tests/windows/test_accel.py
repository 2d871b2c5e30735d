"""The C fold and close (`framework.windows._accel`) do what the Python layouts do, value
for value: every state after every record, every result, kept state and gone key of
every close, and the same exception with the state untouched when a record is bad —
for each layout the C code runs: panes, columns (a mean's and an aggregate's panes since
columns) and panes as stores written before columns keep them, and sessions."""

from __future__ import annotations

import copy
import gc
import importlib
import sys
import weakref
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wtasks import close_layouts, replay

from framework import StreamTask
from framework.api import Envelope, MessageCollector, TaskContext, TaskCoordinator
from framework.testing import run_task
from framework.windows import (
    Hopping,
    Session,
    Tumbling,
    WindowResult,
    Windows,
    accel,
    count,
    max_of,
    mean_of,
    min_of,
    sum_of,
)
from framework.windows.kinds import MAX_TIME, WindowKind
from framework.windows.layouts import Columns, Panes, Sessions, layout_for
from framework.windows.reducers import Reducer, aggregate, fold
from framework.windows.state import key_text
from groupers import SystemStreamPartition

REDUCERS = {
    "count": count(),
    "sum": sum_of("x"),
    "sum of the value": sum_of(),
    "min": min_of("x"),
    "max": max_of("x"),
    "mean": mean_of("x"),
    "aggregate": aggregate(n=count(), total=sum_of("x"), low=min_of("x"), high=max_of("x"),
                           avg=mean_of("x")),
}
KINDS: dict[str, WindowKind] = {
    "tumbling": Tumbling(size_ms=100),
    "hopping": Hopping(size_ms=300, advance_ms=100),
    "session": Session(gap_ms=50),
}
# Ties between ints and floats (min and max keep the first), big integers past 64 bits
# (sums), negatives and fractions.
amounts = st.one_of(st.sampled_from([2, 2.0, 3, -1, 0, -0.0, 0.5, 2**70, -(2**66), 2**62,
                                     2**63 - 1, -(2**63), True]),
                    st.floats(allow_nan=False, allow_infinity=False, width=32))
records = st.lists(st.tuples(st.sampled_from(["a", "b", 7, b"\x01"]), st.integers(0, 700),
                             amounts), min_size=1, max_size=60)


def test_the_extension_is_built_and_used_for_the_built_in_reducers() -> None:
    """`pip install -e .` builds it; a missing build would silently run everything in
    Python, which this suite must notice."""
    module = importlib.import_module("framework.windows._accel")
    assert accel.native() is module
    assert module.MAX_TIME == MAX_TIME  # the C step's bound on event times
    for reducer in REDUCERS.values():
        assert accel.spec(reducer) is not None
    assert accel.spec(fold(0, lambda a, v: a + 1, lambda a, b: a + b)) is None
    assert accel.spec(sum_of(lambda v: v["x"])) is None
    assert accel.spec(aggregate(n=count(), own=fold(0, max, max))) is None


def test_the_switch_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    on = Panes(Tumbling(size_ms=10), count())
    monkeypatch.setenv(accel.ENV, "0")
    off = Panes(Tumbling(size_ms=10), count())
    assert on.fold != on.fold_python and off.fold == off.fold_python


def pair(kind: WindowKind, reducer: Reducer, monkeypatch: pytest.MonkeyPatch,
         stored: str | None = None) -> tuple[Any, Any]:
    """(C layout, Python layout) of ``kind`` and ``reducer`` (``stored``: the layout of a
    store's open windows, see `layout_for`)."""
    native = layout_for(kind, reducer, stored)
    with monkeypatch.context() as patch:
        patch.setenv(accel.ENV, "0")
        python = layout_for(kind, reducer, stored)
    assert type(native) is type(python)
    assert isinstance(native, Panes | Columns | Sessions)
    assert native.fold != native.fold_python and python.fold == python.fold_python
    return native, python


def nested(layout: Any, state: Any) -> Any:
    """``state`` as `Panes` keeps it (`Columns.nested`)."""
    return layout.nested(state) if isinstance(layout, Columns) else state


CASES = [(reducer, None) for reducer in REDUCERS] + [
    ("mean", "panes"), ("aggregate", "panes")]
"""(reducer, stored layout): every reducer as a new store lays it out, and the two that
columns changed as stores from before columns keep them."""


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (1 and 1.0 differ)."""
    return repr(a) == repr(b)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize(("reducer", "stored"), CASES)
@settings(max_examples=40, deadline=None)
@given(stream=records, every=st.integers(1, 12), grace=st.integers(0, 400),
       step=st.integers(1, 6))
def test_c_and_python_fold_and_close_alike(kind: str, reducer: str, stored: str | None,
                                           stream: list[tuple[Any, int, Any]], every: int,
                                           grace: int, step: int) -> None:
    """Records folded in, closes after every few (as the watermark passes them), and at
    the end closes ``step`` ms apart until nothing is open: every window boundary met."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        native, python = pair(KINDS[kind], REDUCERS[reducer], monkeypatch, stored)
    states: list[dict[str, Any]] = [{}, {}]

    def close(closed: int, bound: int) -> None:
        seen = close_layouts([native, python], states, closed, bound)
        assert same(seen[0], seen[1]), (closed, bound)

    def fold(n: int) -> None:
        key, ts, amount = stream[n]
        value = amount if reducer == "sum of the value" else {"x": amount}
        text = key_text(key)
        folded = [layout.fold(held.get(text), value, ts)
                  for layout, held in zip((native, python), states, strict=True)]
        assert same(folded[0], folded[1]), (n, key, ts, amount)
        for held, (state, _) in zip(states, folded, strict=True):
            held[text] = state

    replay([ts for _, ts, _ in stream], every, grace, step, fold, close)
    assert states == [{}, {}]


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("stored", [None, "panes"])
def test_a_bad_record_fails_alike_and_changes_nothing(kind: str, stored: str | None,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    reducer = REDUCERS["aggregate"]
    native, python = pair(KINDS[kind], reducer, monkeypatch, stored)
    for ts in (5, 250, 260):  # the newest pane or session, a new one
        errors = []
        for layout in (native, python):
            state = layout.fold(None, {"x": 1}, 10)[0]
            before = repr(state)
            for bad in ({"y": 1}, None):
                with pytest.raises(Exception) as raised:
                    layout.fold(state, bad, ts)
                errors.append((type(raised.value), str(raised.value)))
                assert repr(state) == before
        assert errors[:2] == errors[2:]
    for layout in (native, python):  # a value the add cannot take: the same TypeError
        state = layout.fold(None, {"x": 1}, 10)[0]
        with pytest.raises(TypeError, match="unsupported operand"):
            layout.fold(state, {"x": "text"}, 12)
        assert repr(state) == repr(layout.fold(None, {"x": 1}, 10)[0])


def test_a_mean_of_a_huge_sum_fails_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """A result Python cannot compute (an integer too big for a float) raises the same
    error from both."""
    native, python = pair(KINDS["tumbling"], mean_of("x"), monkeypatch)
    errors = []
    for layout in (native, python):
        state = layout.fold(None, {"x": 10**400}, 5)[0]
        with pytest.raises(OverflowError) as raised:
            layout.close_all([(0, "sa")], {"sa": state}.get, -1, 1_000, layout.finish,
                             WindowResult)
        errors.append(str(raised.value))
    assert errors[0] == errors[1]


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("stored", [None, "panes"])
def test_no_reference_is_leaked(kind: str, stored: str | None) -> None:
    """A reference the C code took and never gave back would keep every state, value and
    key alive for ever (the worker's memory growing with each record)."""
    layout = layout_for(KINDS[kind], REDUCERS["aggregate"], stored)
    value, text, amount = {"x": 10**30}, "s" + "leak" * 8, 10**30
    for _ in range(3):  # warm: first calls may cache what they look up
        state = layout.fold(None, value, 10)[0]
        layout.fold(state, value, 12)
        layout.close_all([(0, text)], {text: state}.get, -1, 5_000, layout.finish,
                         WindowResult)
    del state
    counts = sys.getrefcount(value), sys.getrefcount(text), sys.getrefcount(amount)
    for _ in range(200):
        state = layout.fold(None, value, 10)[0]
        for ts in (12, 11, 140, 130, 90, 400):  # in place, new panes and sessions, merges
            state = layout.fold(state, value, ts)[0]
        for bound in (100, 350, 5_000):
            out = layout.close_all([(0, text)], {text: state}.get, bound - 100, bound,
                                   layout.finish, WindowResult)
            kept = out[1]
            if kept:
                state = kept[0][1]
            del out, kept
        del state
    assert (sys.getrefcount(value), sys.getrefcount(text), sys.getrefcount(amount)) == counts


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize(("reducer", "stored"), [
    ("count", None), ("mean", None), ("aggregate", None), ("aggregate", "panes")])
@settings(max_examples=25, deadline=None)
@given(stream=st.lists(st.tuples(st.integers(0, 39), st.integers(0, 900), amounts),
                       min_size=1, max_size=200),
       missing=st.sets(st.integers(0, 49), max_size=6), bound=st.integers(0, 1_300))
def test_a_close_of_many_keys_reads_ahead_and_closes_alike(
        kind: str, reducer: str, stored: str | None, stream: list[tuple[int, int, Any]],
        missing: set[int], bound: int) -> None:
    """The C close loads every taken key's state first and reads the next keys' states
    ahead of closing them: with dozens of keys — some without a state, some with an
    empty one — the same results, kept states and gone keys as Python, in order."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        native, python = pair(KINDS[kind], REDUCERS[reducer], monkeypatch, stored)
    closes = []
    for layout in (native, python):
        held: dict[str, Any] = {}
        for key, ts, amount in stream:
            text = f"sk{key:02d}"
            held[text] = layout.fold(held.get(text), {"x": amount}, ts)[0]
        for key in missing:
            held.pop(f"sk{key:02d}", None) if key % 2 else held.update({f"sk{key:02d}": []})
        taken = sorted((0, f"sk{key:02d}") for key in range(50))
        closes.append(layout.close_all(taken, held.get, -1, bound, layout.finish,
                                       WindowResult))
    assert same(closes[0], closes[1])


@pytest.mark.parametrize("stored", [None, "panes"])
def test_a_failed_close_leaves_every_state_as_it_was(stored: str | None,
                                                      monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    """The C close trims the panes a key keeps in place, but only once every key has
    closed: when a later key fails (its mean cannot be a float), the keys closed before
    it keep every pane, as in Python, so the close can run again."""
    native, python = pair(KINDS["hopping"], REDUCERS["aggregate"], monkeypatch, stored)
    for layout in (native, python):
        held: dict[str, Any] = {}
        for text, amount in (("sa", 1), ("sb", 10**400)):
            for ts in (10, 150, 250, 350):
                held[text] = layout.fold(held.get(text), {"x": amount}, ts)[0]
        before = repr(held)
        with pytest.raises(OverflowError):
            layout.close_all([(0, "sa"), (0, "sb")], held.get, -1, 300, layout.finish,
                             WindowResult)
        assert repr(held) == before
        del held["sb"]  # the close runs again without the bad key: sa's windows are there
        results, kept, _ = layout.close_all([(0, "sa")], held.get, -1, 300, layout.finish,
                                            WindowResult)
        assert [(r.start, r.end) for r in results] == [(0, 300)]
        assert [(text, nested(layout, state), due) for text, state, due in kept] == [
            ("sa", [100, [1, 1, 1, 1, [1, 1]], 200, [1, 1, 1, 1, [1, 1]],
                    300, [1, 1, 1, 1, [1, 1]]], 400)]


def test_c_folds_and_closes_in_place_and_no_result_changes_after(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What keeps the C path's states few and small — a record into an existing pane
    changes its aggregate's lists in place, a close trims the state it keeps in place,
    keys share the int of a pane's start — and the results it already gave stay as they
    were when later records change those lists (panes as stores from before columns
    keep them)."""
    native, _ = pair(KINDS["hopping"], REDUCERS["aggregate"], monkeypatch, "panes")
    state = native.fold(None, {"x": 2}, 1_010)[0]
    aggregate, pair_list = state[1], state[1][4]
    assert native.fold(state, {"x": 3}, 1_020) == (state, False)
    assert state[1] is aggregate and state[1][4] is pair_list
    assert state == [1_000, [2, 5, 2, 3, [5, 2]]]
    other = native.fold(None, {"x": 1}, 1_030)[0]
    assert other[0] is state[0]  # one int object for the pane start 1000
    native.fold(state, {"x": 4}, 1_110)
    results, kept, _ = native.close_all([(0, "sa")], {"sa": state}.get, -1, 1_300,
                                        native.finish, WindowResult)
    assert kept == [("sa", state, 1_400)] and kept[0][1] is state
    assert state == [1_100, [1, 4, 4, 4, [4, 1]]]
    assert results[0].end is kept[0][1][0]  # the window's end and the pane: one int
    shown = repr(results)
    for ts in (1_120, 1_130):
        native.fold(state, {"x": 9}, ts)
    assert repr(results) == shown
    single_mean = pair(KINDS["tumbling"], REDUCERS["mean"], monkeypatch, "panes")[0]
    state = single_mean.fold(None, {"x": 1}, 10)[0]
    mean_pair = state[1]
    single_mean.fold(state, {"x": 2}, 20)
    assert state[1] is mean_pair and mean_pair == [3, 2]


@pytest.mark.parametrize("reducer", ["mean", "aggregate"])
@pytest.mark.parametrize("shape", [tuple, lambda parts: [*parts, 0]])
def test_aggregates_the_fold_did_not_make_are_replaced_not_changed(
        reducer: str, shape: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """In-place adds only touch lists shaped as the fold makes them: an aggregate or a
    mean's pair that is a tuple, or a list of another length, gets a new value as in
    Python (a tuple changed in place would corrupt memory)."""
    native, python = pair(KINDS["tumbling"], REDUCERS[reducer], monkeypatch, "panes")
    mean = (2, 1)
    made = ([1, 2, 2, 2, shape(mean)] if reducer == "aggregate" else shape(mean))
    states = [[1_000, made], [1_000, copy.deepcopy(made)]]
    folded = [layout.fold(state, {"x": 3}, 1_010)
              for layout, state in zip((native, python), states, strict=True)]
    assert same(folded[0], folded[1])
    assert mean == (2, 1)


@pytest.mark.parametrize(("reducer", "stored"), [
    ("sum", None), ("min", None), ("max", None), ("mean", None), ("aggregate", None),
    ("mean", "panes"), ("aggregate", "panes")])
def test_window_merges_past_64_bits_equal_python(reducer: str, stored: str | None,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A close adds and compares the panes' ints as C integers while they and their sums
    fit 64 bits: sums that pass 2**63 - 1 or go below -2**63 part-way through a window,
    ints past 64 bits, bools and floats among ints all merge as Python merges them."""
    native, python = pair(KINDS["hopping"], REDUCERS[reducer], monkeypatch, stored)
    rows = [(2**62, 2**62, 2**62, 1), (2**63 - 1, 1, -1, 0), (-(2**63), -1, 2**63 - 1, 2),
            (3, 2**70, 1, 2), (1, True, 2, 1), (2, 2.0, 2, 2.0), (5, -(2**66), 2**66, 1)]
    for amounts in rows:
        closes = []
        for layout in (native, python):
            state = None
            for n, amount in enumerate(amounts):
                state = layout.fold(state, {"x": amount}, 100 * n + 10)[0]
            closes.append(layout.close_all([(0, "sa")], {"sa": state}.get, -1, 1_000,
                                           layout.finish, WindowResult))
        assert same(closes[0], closes[1]), amounts


EDGES = [2**53 - 1, 2**53, 2**53 + 1, 2**53 + 3, -(2**53) + 1, -(2**53), -(2**53) - 3,
         2**30 - 1, 2**30, -(2**30), -(2**30) + 1, 2**60 + 1, 0, 1, -1, 7]
"""Around where ints stop being exact as doubles (2**53: C divides them as doubles only
below it) and where they stop fitting one digit (2**30: C reads those in place)."""


@pytest.mark.parametrize("kind", ["tumbling", "hopping"])
@pytest.mark.parametrize("reducer", ["mean", "aggregate"])
@pytest.mark.parametrize("stored", [None, "panes"])
def test_means_divide_as_python_does_around_2_to_the_53(
        kind: str, reducer: str, stored: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A mean's result from its pair (one pane) or its panes' pairs (hopping merges three):
    the same float, or the same error for a count of 0, for sums and counts on either side
    of 2**53 and of 2**30 (in columns: its sum and count columns)."""
    native, python = pair(KINDS[kind], REDUCERS[reducer], monkeypatch, stored)
    shapes = [(s, c) for s in EDGES for c in (1, 3, -3, 2**53 - 1, 2**53 + 1, -(2**53) - 1, 0)]
    for (s, c), (s2, c2) in zip(shapes, shapes[9:] + shapes[:9], strict=True):
        outcomes = []
        for layout in (native, python):
            if reducer == "mean":
                panes = [[s, c], [s2, c2], [-s2, c2 + c]]
            else:
                panes = [[c, s, s, s, [s, c]], [c2, s2, s2, s2, [s2, c2]],
                         [c, s, s, s, [-s2, c2 + c]]]
            state = [0, panes[0], 100, panes[1], 200, panes[2]]
            if isinstance(layout, Columns):  # the same panes' numbers inline
                state = [x for i, pane in zip((0, 100, 200), panes, strict=True)
                         for x in (i, *flatten(pane))]
            try:
                outcomes.append(layout.close_all([(0, "sa")], {"sa": state}.get, -1, 1_000,
                                                 layout.finish, WindowResult)[0])
            except ZeroDivisionError as error:
                outcomes.append(repr(error))
        assert same(outcomes[0], outcomes[1]), (s, c, s2, c2)


def flatten(aggregate: Any) -> list[Any]:
    """A `Panes` aggregate's numbers in order (a pane's columns)."""
    if not isinstance(aggregate, list):
        return [aggregate]
    return [x for part in aggregate for x in flatten(part)]


def test_a_load_that_changes_what_is_taken_fails_cleanly(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """The C close loads every state before closing any, through ``load`` (Python): a
    ``load`` that changes the taken list under it raises instead of reading past it."""
    native, _ = pair(KINDS["hopping"], REDUCERS["count"], monkeypatch)
    held = {f"s{n}": native.fold(None, {"x": 1}, 10)[0] for n in range(5)}
    taken = [(0, text) for text in held]

    def load(text: str) -> Any:
        taken.clear()
        return held[text]

    with pytest.raises(RuntimeError, match="taken changed"):
        native.close_all(taken, load, -1, 1_000, native.finish, WindowResult)


class StepTask(StreamTask):
    """`Windows` over the envelope's own timestamp (the C step's case), every result
    sent to ``local.out``; counts the records the C step took."""

    def __init__(self, kind: WindowKind, reducer: Reducer, grace_policy: str,
                 cached: int | None = None, keywords: bool = False) -> None:
        self.kind, self.reducer, self.policy, self.cached = kind, reducer, grace_policy, cached
        self.keywords = keywords  # every other record's process called with keywords
        self.trace: list[tuple[dict[str, int], int | None]] = []

    windows_type: type[Windows] = Windows

    def init(self, context: TaskContext) -> None:
        self.windows = self.windows_type(context, "w", self.kind, self.reducer,
                                         output="local.out",
                                         late=self.policy,  # type: ignore[arg-type]
                                         late_stream="local.late")
        if self.cached is not None:
            self.windows._keyed.max_cached = self.cached

    @property
    def stepped(self) -> int:
        """How many records the C step took (0 where Python runs every record)."""
        return getattr(self.windows.process, "taken", 0)  # a Python method has none

    def process(self, envelope: Envelope, collector: MessageCollector,
                coordinator: TaskCoordinator) -> None:
        if self.keywords and envelope.offset % 2:
            self.windows.process(envelope=envelope, collector=collector)
        else:
            self.windows.process(envelope, collector)
        windows = self.windows  # when each key is due next, as the closes will read it
        self.trace.append((dict(windows._keyed.index.at), windows._next_close))


def envelopes(rows: list[tuple[Any, int, int, Any]]) -> list[Envelope]:
    """Records of ``local.views`` (key, partition, ts, value) with offsets per partition;
    a value ``None`` is a watermark record at ``ts``."""
    offsets: dict[int, int] = {}
    made = []
    for key, partition, ts, amount in rows:
        offset = offsets.get(partition, 0)
        offsets[partition] = offset + 1
        value = {"watermark": ts} if amount is None else {"x": amount}
        made.append(Envelope(SystemStreamPartition("local", "views", partition), offset,
                             f"~wm-{partition}" if amount is None else key, value, ts, {}))
    return made


def run_both(kind: WindowKind, reducer: Reducer, rows: list[tuple[Any, int, int, Any]],
             policy: str = "dead-letter", buffer: int = 7, cached: int | None = None
             ) -> tuple[Any, Any, StepTask]:
    results, tasks = [], []
    for setting in ("1", "0"):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(accel.ENV, setting)
            task = StepTask(kind, reducer, policy, cached)
            results.append(run_task(task, envelopes(rows), stores={"w": None},
                                    write_buffer_max_keys=buffer))
            tasks.append(task)
    assert tasks[1].stepped == 0
    assert tasks[0].trace == tasks[1].trace
    return results[0], results[1], tasks[0]


def outputs(result: Any) -> list[tuple[Any, ...]]:
    return [(m.stream, m.key, repr(m.value)) for m in result.outputs]


def test_the_c_process_takes_keywords_and_is_freed_with_its_aggregation() -> None:
    """`Windows.process` in C (`_accel.Stepper`) called with keywords gives what the
    Python path gives (the C step still taking the common records), and an aggregation
    holding its stepper (a reference cycle) is freed by the collector once dropped."""
    stream = [(key, p, ts, 1) for ts in range(0, 600, 7) for key, p in (("a", 0), ("b", 1))]
    python = None
    for setting in ("0", "1"):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(accel.ENV, setting)
            task = StepTask(Tumbling(size_ms=100), count(), "count", keywords=True)
            result = run_task(task, envelopes(stream), stores={"w": None})
        python = outputs(result) if python is None else python
    assert outputs(result) == python and len(python) == 10
    assert task.stepped == len(stream) - 1  # the first record decides the cache, in Python
    freed = weakref.ref(task.windows)
    del task.windows, result
    gc.collect()
    assert freed() is None


class _CountedWindows(Windows):
    """A subclass with its own `process` (calling the base's)."""

    calls = 0

    def process(self, envelope: Envelope, collector: MessageCollector) -> list[WindowResult]:
        _CountedWindows.calls += 1
        return super().process(envelope, collector)


def test_a_subclass_keeps_its_own_process_over_the_c_step() -> None:
    """The C `process` stands in only for `Windows.process` itself: a subclass's override
    is still called for every record, and its base call still takes the C step."""
    stream = [(key, p, ts, 1) for ts in range(0, 600, 7) for key, p in (("a", 0), ("b", 1))]
    task = StepTask(Tumbling(size_ms=100), count(), "count")
    python = outputs(run_task(task, envelopes(stream), stores={"w": None}))
    task = StepTask(Tumbling(size_ms=100), count(), "count")
    task.windows_type = _CountedWindows
    result = run_task(task, envelopes(stream), stores={"w": None})
    assert _CountedWindows.calls == len(stream) and outputs(result) == python
    assert task.windows._step is not None and "process" not in task.windows.__dict__




@st.composite
def rows(draw: st.DrawFn) -> list[tuple[Any, int, int, Any]]:
    """Records (key, partition, ts, amount; amount None: a watermark record) whose times
    follow a clock that moves on by 0, 1, 9, 10 or 50 ms, each up to 100 ms behind it: so
    records fall exactly at, one before and one after window ends, lateness bounds and
    partition times, and keys still have open windows when they come late."""
    clock, made = 0, []
    for _ in range(draw(st.integers(1, 100))):
        clock += draw(st.sampled_from([0, 1, 9, 10, 50]))
        ts = max(0, clock - draw(st.sampled_from([0, 0, 1, 9, 10, 11, 50, 100])))
        made.append((draw(st.sampled_from(["a", "b", 7])), draw(st.integers(0, 1)), ts,
                     draw(st.one_of(st.none(), st.sampled_from([1, 2, 2.0, -3, 2**70])))))
    return made


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("reducer", ["count", "aggregate"])
@settings(max_examples=60, deadline=None)
@given(stream=rows(), grace=st.sampled_from([0, 1, 9, 10, 11, 50, 100]),
       buffer=st.integers(1, 30), cached=st.sampled_from([None, None, 1, 2]))
def test_windows_with_the_c_step_emit_and_store_what_python_does(
        kind: str, reducer: str, stream: list[tuple[Any, int, int, Any]], grace: int,
        buffer: int, cached: int | None) -> None:
    """Whole `Windows` runs over the same records, late ones, watermark records, non-str
    keys, commits every few keys and a cache too small for every key included: the same
    due time for every key after every record, the same outputs in the same order, the
    same store, the same dead letters."""
    chosen = KINDS[kind]
    with_grace = (Session(gap_ms=50, grace_ms=grace) if kind == "session" else
                  Hopping(size_ms=chosen.size_ms, advance_ms=chosen.advance_ms,
                          grace_ms=grace))
    native, python, _ = run_both(with_grace, REDUCERS[reducer], stream, buffer=buffer,
                                 cached=cached)
    assert outputs(native) == outputs(python)
    assert repr(sorted(native.stores["w"].items())) == repr(sorted(python.stores["w"].items()))


def test_the_c_step_takes_the_common_records() -> None:
    """Records of a plain stream go through the C step but the task's first (the states'
    cache is set up then) and a non-str key's."""
    stream = [("a", 0, ts, 1) for ts in range(0, 1_000, 10)] + [(7, 0, 990, 1)]
    native, python, task = run_both(Tumbling(size_ms=100), count(), stream)
    assert outputs(native) == outputs(python)
    assert task.stepped == len(stream) - 2  # the key's first record, and the int key


def test_a_key_written_again_after_its_close_keeps_its_state_in_the_store() -> None:
    """A close that empties a key deletes it from the store at the next close unless a
    record writes it first: the C step's new state for the key must cancel that delete
    (else the state the next commit wrote is deleted, and a restart loses it)."""
    stream = [("a", 0, 0, 1), ("b", 0, 100, 1), ("a", 0, 110, 1), ("b", 0, 120, 1),
              ("c", 0, 200, 1), ("c", 0, 201, 1)]
    native, python, task = run_both(Session(gap_ms=50), count(), stream, buffer=1)
    assert task.stepped == len(stream) - 1
    assert outputs(native) == outputs(python)
    assert sorted(native.stores["w"].items()) == sorted(python.stores["w"].items())
    assert "k|sa" in native.stores["w"]
