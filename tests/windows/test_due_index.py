"""`DueIndex` against a plain model of what it promises: each key due at one time (the
earliest noted, or the one it was moved to, rounded up to the granule), handed out by
`due` in time order (within a time in no promised order: the windows sort the keys of a
close, the join its results)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.windows.state import DueIndex

TEXTS = ["sa", "sb", "sc", "sd", "se", "sf"]
times = st.one_of(st.integers(0, 40), st.integers(0, 10**6), st.sampled_from([2**63, 2**70]))
rows = st.lists(st.tuples(st.sampled_from(TEXTS), st.sampled_from([[], [1, 2], [0]]), times),
                max_size=6, unique_by=lambda row: row[0])
steps = st.lists(st.one_of(
    st.tuples(st.just("note"), st.sampled_from(TEXTS), times),
    st.tuples(st.just("move"), st.sampled_from(TEXTS), times),
    st.tuples(st.just("note_all"), st.lists(st.tuples(st.sampled_from(TEXTS), times),
                                            max_size=5)),
    st.tuples(st.just("note_kept"), rows, st.booleans()),
    st.tuples(st.just("due"), times),
    st.tuples(st.just("restore"), st.integers(0, 3)),
    st.tuples(st.just("next"))), max_size=30)


class Model:
    """Key → the time it is due."""

    def __init__(self, granule: int) -> None:
        self.granule = granule
        self.keys: dict[str, int] = {}

    def rounded(self, at: int) -> int:
        return at + -at % self.granule if self.granule > 1 else at

    def note(self, text: str, at: int) -> int:
        at = self.rounded(at)
        if text in self.keys and self.keys[text] <= at:
            return self.keys[text]
        self.keys[text] = at
        return at

    def move(self, text: str, at: int) -> int:
        at = self.rounded(at)
        self.keys[text] = at
        return at

    def note_all(self, due: list[tuple[str, int]]) -> None:
        for text, at in due:
            self.note(text, at)

    def note_kept(self, kept: list[tuple[str, Any, int]], cache: dict[str, Any] | None
                  ) -> list[tuple[str, Any, int]]:
        for text, remaining, at in kept:
            if remaining:
                if cache is not None:
                    cache[text] = remaining
                self.note(text, at)
        return [row for row in kept if not row[1]]

    def due(self, bound: int) -> list[tuple[int, str]]:
        taken = sorted((at, text) for text, at in self.keys.items() if at <= bound)
        for _, text in taken:
            del self.keys[text]
        return taken

    def restore(self, taken: list[tuple[int, str]]) -> None:
        for at, text in taken:
            self.note(text, at)

    def next(self) -> int | None:
        return min(self.keys.values(), default=None)


def step(index: Any, action: tuple[Any, ...], handed: list[Any]) -> Any:
    """One step on ``index`` (a `DueIndex` or the `Model`): its answer."""
    name, *args = action
    if name == "note_kept":
        cache: dict[str, Any] | None = {} if args[1] else None
        return index.note_kept(list(args[0]), cache), cache
    if name == "restore":
        return index.restore(handed[args[0]] if args[0] < len(handed) else [])
    answer = getattr(index, name)(*args)
    if name == "due":
        handed.append(answer)
        assert [at for at, _ in answer] == sorted(at for at, _ in answer)
        return sorted(answer)  # in time order; within a time, as the model sorts them
    return answer


@pytest.mark.parametrize("granule", [1, 7, 10**6 + 3])
@settings(max_examples=200, deadline=None)
@given(actions=steps)
def test_the_index_keeps_each_key_due_when_the_model_does(granule: int,
                                                          actions: list[Any]) -> None:
    index, model = DueIndex(granule), Model(granule)
    handed: tuple[list[Any], list[Any]] = ([], [])
    for action in actions:
        assert step(index, action, handed[0]) == step(model, action, handed[1]), action
        assert index.at == model.keys, action
        assert len(index) == len(model.keys)


def test_kept_rows_keeping_nothing_come_back_in_order_and_are_not_noted() -> None:
    index, cache = DueIndex(), {"sb": [9]}
    empty = index.note_kept([("sa", [1], 30), ("sb", [], 20), ("sc", [2], 30),
                             ("sd", [], 10)], cache)
    assert empty == [("sb", [], 20), ("sd", [], 10)]
    assert cache == {"sa": [1], "sb": [9], "sc": [2]} and index.at == {"sa": 30, "sc": 30}
    assert sorted(index.due(30)) == [(30, "sa"), (30, "sc")]


def test_a_key_moved_later_at_every_record_stays_filed_once_until_its_bucket_comes_up(
        ) -> None:
    """A session growing with each record moves its key later each time: the key stays
    filed where it was, and is filed again (once) when that bucket comes up."""
    index = DueIndex(granule=10)
    index.note("sa", 5)
    for at in range(20, 1_000, 10):
        index.move("sa", at)
    assert sum(map(len, index.buckets.values())) == 1
    assert index.next() == 990 and index.due(500) == [] and index.at == {"sa": 990}
    assert sum(map(len, index.buckets.values())) == 1
    assert index.due(990) == [(990, "sa")] and index.next() is None
