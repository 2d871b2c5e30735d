"""Reading a key's open windows from a window store's committed state
(`framework.queries.windows`): real `Windows` over a real `TaskStore`, every kind and
layout, checked against the windows' definition."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from windows.wtasks import Context, Sent

from framework.api import Envelope
from framework.config.serdes import JsonSerde, StringSerde
from framework.queries.errors import NotQueryableError, TaskUnavailableError
from framework.queries.windows import OpenWindow, read_windows
from framework.stores.base import ChangelogPosition
from framework.stores.buffer import TaskStore
from framework.stores.memory import MemoryEngine
from framework.windows import Hopping, Session, Tumbling, Windows, aggregate, count, mean_of
from framework.windows.kinds import WindowKind
from framework.windows.reducers import Reducer
from groupers import SystemStreamPartition

VIEWS = SystemStreamPartition("local", "views", 0)
KINDS: list[WindowKind] = [Tumbling(size_ms=10), Hopping(size_ms=30, advance_ms=10),
                           Hopping(size_ms=25, advance_ms=10), Session(gap_ms=7)]
REDUCERS: list[Reducer] = [count(), mean_of("x"), aggregate(n=count(), avg=mean_of("x"))]
records = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 200),
                             st.integers(0, 9)), max_size=40)


def commit(store: TaskStore, offset: int) -> None:
    store.apply(store.drain(), ChangelogPosition("w-changelog", 0, offset))


def expected_open(kind: WindowKind, reducer: Reducer, stream: list[tuple[str, int, int]],
                  emitted: set[tuple[str, int, int]]) -> dict[str, list[OpenWindow]]:
    """Each key's windows holding on-time records and not emitted, from the definition."""
    held: dict[tuple[str, int, int], list[int]] = {}
    high: int | None = None
    for key, ts, x in stream:
        if high is not None and ts < high - kind.grace_ms:
            continue  # late
        high = ts if high is None else max(high, ts)
        if isinstance(kind, Session):
            continue
        for start in range(0, ts + 1, kind.advance_ms):
            if start <= ts < start + kind.size_ms:
                held.setdefault((key, start, start + kind.size_ms), []).append(x)
    if isinstance(kind, Session):
        for key in {k for k, _, _ in stream}:
            kept = sorted((ts, x) for k, ts, x in _on_time(stream, kind) if k == key)
            group: list[tuple[int, int]] = []
            for item in [*kept, None]:
                if group and (item is None or item[0] - group[-1][0] > kind.gap_ms):
                    held[(key, group[0][0], group[-1][0] + 1)] = [x for _, x in group]
                    group = []
                if item is not None:
                    group.append(item)
    found: dict[str, list[OpenWindow]] = {}
    for (key, start, end), xs in sorted(held.items(), key=lambda i: (i[0][0], i[0][1])):
        if (key, start, end) not in emitted:
            found.setdefault(key, []).append(OpenWindow(start, end, _result(reducer, xs)))
    return found


def _on_time(stream: list[tuple[str, int, int]], kind: WindowKind) -> list[tuple[str, int, int]]:
    high: int | None = None
    kept = []
    for key, ts, x in stream:
        if high is None or ts >= high - kind.grace_ms:
            kept.append((key, ts, x))
            high = ts if high is None else max(high, ts)
    return kept


def _result(reducer: Reducer, xs: list[int]) -> Any:
    """A window's result by `REDUCERS`: count, mean, or both by name."""
    mean = sum(xs) / len(xs)
    return [len(xs), mean, {"n": len(xs), "avg": mean}][REDUCERS.index(reducer)]


@settings(max_examples=120, deadline=None)
@given(stream=records, which=st.integers(0, 3), how=st.integers(0, 2),
       watermark=st.integers(0, 250))
def test_a_keys_open_windows_are_its_windows_not_yet_emitted(
        stream: list[tuple[str, int, int]], which: int, how: int, watermark: int) -> None:
    kind, reducer = KINDS[which], REDUCERS[how]
    if isinstance(kind, Session) and reducer.merge is None:
        return
    context = Context()
    windows = Windows(context, "w", kind, reducer)
    sent = Sent()
    emitted = []
    for offset, (key, ts, x) in enumerate(stream):
        emitted += windows.process(Envelope(VIEWS, offset, key, {"x": x}, ts), sent)
    emitted += windows.process(Envelope(VIEWS, len(stream), "~wm", {"watermark": watermark},
                                        0), sent)
    commit(context.state, len(stream) + 1)
    want = expected_open(kind, reducer, stream, {(r.key, r.start, r.end) for r in emitted})
    for key in ("a", "b", "c"):
        found = read_windows(context.state, key, None, None, 1000)
        assert _approx(found.windows) == _approx(want.get(key, []))
        assert found.position == len(stream) + 1


def _approx(found: list[OpenWindow]) -> list[tuple[int, int, Any]]:
    def rounded(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: rounded(v) for k, v in value.items()}
        return round(value, 9) if isinstance(value, float) else value
    return [(w.start, w.end, rounded(w.value)) for w in found]


def counting(kind: WindowKind) -> tuple[Context, Windows]:
    context = Context()
    return context, Windows(context, "w", kind, count())


def test_a_read_sees_the_last_commit_not_the_records_since() -> None:
    context, windows = counting(Tumbling(size_ms=10))
    windows.process(Envelope(VIEWS, 0, "a", {}, 3), Sent())
    commit(context.state, 1)
    windows.process(Envelope(VIEWS, 1, "a", {}, 4), Sent())  # in memory: not committed
    windows.process(Envelope(VIEWS, 2, "a", {}, 14), Sent())
    found = read_windows(context.state, "a", None, None, 1000)
    assert (found.windows, found.position) == ([OpenWindow(0, 10, 1)], 1)


def test_the_time_range_selects_windows_by_start() -> None:
    context, windows = counting(Hopping(size_ms=30, advance_ms=10))
    for offset, ts in enumerate((5, 25, 29)):  # open: [0, 30), [10, 40), [20, 50)
        windows.process(Envelope(VIEWS, offset, "a", {}, ts), Sent())
    commit(context.state, 3)
    assert [(w.start, w.value) for w in read_windows(context.state, "a", 10, 30, 1000)
            .windows] == [(10, 2), (20, 2)]


def test_closed_windows_leave_the_answer_and_set_the_closed_bound() -> None:
    context, windows = counting(Tumbling(size_ms=10))
    closed = []
    for offset, ts in enumerate((3, 13, 23)):  # the watermark follows: 23 closes [10, 20)
        closed += windows.process(Envelope(VIEWS, offset, "a", {}, ts), Sent())
    commit(context.state, 4)
    found = read_windows(context.state, "a", None, None, 1000)
    assert [(r.start, r.value) for r in closed] == [(0, 1), (10, 1)]
    assert (found.windows, found.closed) == ([OpenWindow(20, 30, 1)], 23)


def test_a_key_without_windows_has_none() -> None:
    context, windows = counting(Tumbling(size_ms=10))
    windows.process(Envelope(VIEWS, 0, "a", {}, 3), Sent())
    commit(context.state, 1)
    assert read_windows(context.state, "zzz", None, None, 1000).windows == []


def test_a_store_without_windows_is_not_queryable_as_windows() -> None:
    store = TaskStore("plain", MemoryEngine(), StringSerde(), JsonSerde(), task="t")
    with pytest.raises(NotQueryableError, match="store 'plain' of task 't' holds no windows"):
        read_windows(store, "a", None, None, 1000)


def test_a_window_store_whose_task_has_not_made_its_windows_yet_answers_retry() -> None:
    context, _windows = counting(Tumbling(size_ms=10))
    commit(context.state, 1)  # the shape the windows wrote
    store = TaskStore("w", context.state.engine, StringSerde(), JsonSerde(), task="t")
    with pytest.raises(TaskUnavailableError, match="has not made its Windows yet"):
        read_windows(store, "a", None, None, 1000)


def test_every_count_answered_is_at_most_its_windows_final_count() -> None:
    """Open windows only grow: an answer is a lower bound of what the window emits."""
    context, windows = counting(Hopping(size_ms=20, advance_ms=10))
    answered: Counter[tuple[int, int]] = Counter()
    emitted = []
    for offset, ts in enumerate(range(0, 100, 3)):
        emitted += windows.process(Envelope(VIEWS, offset, "a", {}, ts), Sent())
        commit(context.state, offset + 1)
        for window in read_windows(context.state, "a", None, None, 1000).windows:
            assert window.value >= answered[(window.start, window.end)]
            answered[(window.start, window.end)] = window.value
    emitted += windows.process(Envelope(VIEWS, 99, "~wm", {"watermark": 10**6}, 0), Sent())
    final = {(r.start, r.end): r.value for r in emitted}
    assert all(value <= final[window] for window, value in answered.items())
