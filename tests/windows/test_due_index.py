"""`DueIndex` with its loops in C (`_accel.due_take`, `_accel.note_kept`) does what it does
in Python: the same keys handed out in the same order, the same index after every step."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.windows import accel
from framework.windows.state import DueIndex

TEXTS = ["sa", "sb", "sc", "sd", "se", "sf"]
times = st.one_of(st.integers(0, 40), st.integers(0, 10**6),
                  st.sampled_from([2**62, 2**63 - 1, 2**70, -(2**63), -5, 2.5, True]))
"""Due times: close ones that share buckets, spread ones, and the values C compares and
rounds through Python's object API (past 2**62, negative, a float, a bool)."""
rows = st.lists(st.tuples(st.sampled_from(TEXTS), st.sampled_from([[], [1, 2], [0], ()]),
                          times), max_size=6, unique_by=lambda row: row[0])
steps = st.lists(st.one_of(
    st.tuples(st.just("note"), st.sampled_from(TEXTS), times),
    st.tuples(st.just("move"), st.sampled_from(TEXTS), times),
    st.tuples(st.just("note_all"), st.lists(st.tuples(st.sampled_from(TEXTS), times),
                                            max_size=5)),
    st.tuples(st.just("note_kept"), rows, st.booleans()),
    st.tuples(st.just("due"), times),
    st.tuples(st.just("restore"), st.integers(0, 3)),
    st.tuples(st.just("next"))), max_size=30)


def pair(granule: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[DueIndex, DueIndex]:
    """(index with C loops, index in Python) of ``granule``."""
    native = DueIndex(granule)
    with monkeypatch.context() as patch:
        patch.setenv(accel.ENV, "0")
        python = DueIndex(granule)
    assert native._native is not None and python._native is None
    return native, python


def inside(index: DueIndex) -> Any:
    return repr((index.at, index._buckets, index._times))


def step(index: DueIndex, action: tuple[Any, ...], handed: list[Any]) -> Any:
    """One step on ``index``: its answer (or its exception's repr)."""
    name, *args = action
    try:
        if name == "note_kept":
            cache: dict[str, Any] | None = {} if args[1] else None
            empty = index.note_kept(list(args[0]), cache)
            return repr((empty, cache))
        if name == "restore":
            index.restore(handed[args[0]] if args[0] < len(handed) else [])
            return None
        answer = getattr(index, name)(*args)
        if name == "due":
            handed.append(answer)
        return repr(answer)
    except Exception as error:  # the same error from both
        return repr(error)


@pytest.mark.parametrize("granule", [1, 7, 0, 2**62 + 3, 2**63 + 5])
@settings(max_examples=200, deadline=None)
@given(actions=steps)
def test_c_loops_keep_the_index_as_python_does(granule: int, actions: list[Any]) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        native, python = pair(granule, monkeypatch)
    handed: dict[int, list[Any]] = {0: [], 1: []}
    for action in actions:
        answers = [step(index, action, handed[n])
                   for n, index in enumerate((native, python))]
        assert answers[0] == answers[1], action
        assert inside(native) == inside(python), action


def test_a_time_without_its_bucket_fails_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    native, python = pair(1, monkeypatch)
    errors = []
    for index in (native, python):
        index.note("sa", 5)
        index._buckets.clear()
        with pytest.raises(KeyError) as caught:
            index.due(10)
        errors.append(repr(caught.value))
    assert errors[0] == errors[1] == "KeyError(5)"


def test_kept_rows_must_be_triples() -> None:
    native = DueIndex()
    with pytest.raises(TypeError, match="kept holds"):
        native.note_kept([("sa", [1])], None)  # type: ignore[list-item]


def test_the_index_of_a_windowed_job_uses_the_c_loops() -> None:
    """`KeyedStates` makes its index with them wherever the extension is built."""
    assert DueIndex()._native is accel.native() is not None


@pytest.mark.parametrize("granule", [1, 3])
def test_no_reference_is_leaked(granule: int) -> None:
    """Every key text and time the C loops took a reference to is let go: after many
    notes and hand-outs and a cleared index, each is held as often as before."""
    index = DueIndex(granule)
    texts = [f"s{n}" for n in range(50)]
    stamps = [10**12 + n for n in range(50)]  # not shared by anything else
    cache: dict[str, Any] = {}
    before = [sys.getrefcount(x) for x in texts + stamps]
    for round_ in range(20):
        kept = [(text, [round_] if n % 7 else [], stamps[(n + round_) % 50])
                for n, text in enumerate(texts)]
        index.note_kept(kept, cache)
        del kept
        index.due(stamps[round_ * 2])
    index.clear()
    cache.clear()
    assert [sys.getrefcount(x) for x in texts + stamps] == before
