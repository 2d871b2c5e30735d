"""Write-back window state: a record changes its key's state in memory only; each commit
puts the state of every key changed since the last one, once. A crash between two commits
loses only what was never committed, and the windows come out exactly as without it."""

from __future__ import annotations

import gc
import random
import weakref
from collections import Counter
from typing import Any

import pytest
from wtasks import (
    Context,
    JoinTask,
    Sent,
    WindowTask,
    envelope,
    ev,
    left,
    mark,
    marks,
    pairs,
    right,
    table,
)

from framework.api import MessageCollector, TaskCoordinator
from framework.config.serdes import JsonSerde
from framework.testing import TaskRunResult, run_task
from framework.windows import Hopping, Session, Tumbling, WindowError, Windows, count, fold, keyed
from framework.windows.kinds import WindowKind
from framework.windows.state import load_state

COMMIT_EVERY = 7
KEYS = ["a", "b", "c", "d"]


class CommitsEvery:
    """Mixed in before a test task: asks for a commit every `COMMIT_EVERY` records."""

    seen = 0

    def process(self, envelope: Any, collector: MessageCollector,
                coordinator: TaskCoordinator) -> None:
        super().process(envelope, collector, coordinator)  # type: ignore[misc]
        self.seen += 1
        if self.seen % COMMIT_EVERY == 0:
            coordinator.commit()


def committing(kind: WindowKind) -> type[WindowTask]:
    """A `WindowTask` class (run_task's crash needs a class) that commits every
    `COMMIT_EVERY` records."""

    class Committing(CommitsEvery, WindowTask):
        def __init__(self) -> None:
            super().__init__(kind)

    return Committing


def events(seed: int) -> list[tuple[Any, ...]]:
    """Records of four keys over two partitions, event time rising with jitter that
    stays within the grace, a watermark record now and then, and one closing everything."""
    rng = random.Random(seed)
    inputs: list[tuple[Any, ...]] = []
    for n in range(120):
        inputs.append(ev(rng.choice(KEYS), n * 10 + rng.randrange(0, 30), n % 2))
        if n % 25 == 24:
            inputs += [mark(n * 10 - 40, 0), mark(n * 10 - 40, 1)]
    return [*inputs, mark(10 ** 9, 0), mark(10 ** 9, 1)]


def expected(kind: WindowKind, inputs: list[tuple[Any, ...]]) -> Counter[tuple[Any, ...]]:
    """Each window's count, recomputed from the records (none is late: grace 100)."""
    found: Counter[tuple[Any, ...]] = Counter()
    records = [(key, value["ts"]) for _, key, value, _ in inputs if "ts" in value]
    if isinstance(kind, Session):
        for key in KEYS:
            times = sorted(ts for k, ts in records if k == key)
            first = last = times[0]
            size = 1
            for ts in times[1:]:
                if ts - last > kind.gap_ms:
                    found[(key, first, last + 1)] = size
                    first, size = ts, 0
                last, size = ts, size + 1
            found[(key, first, last + 1)] = size
        return found
    for key, ts in records:
        for start in kind.starts(ts):
            found[(key, start, start + kind.size_ms)] += 1
    return found


def windows_of(result: TaskRunResult) -> Counter[tuple[Any, ...]]:
    rows = table(result)
    assert len(rows) == len(set((key, start) for key, start, _, _ in rows))  # each once
    return Counter({(key, start, end): value for key, start, end, value in rows})


@pytest.mark.parametrize("kind", [Tumbling(size_ms=50, grace_ms=100),
                                  Hopping(size_ms=60, advance_ms=20, grace_ms=100),
                                  Session(gap_ms=15, grace_ms=100)],
                         ids=["tumbling", "hopping", "session"])
def test_a_crash_between_commits_emits_every_window_exactly(kind: WindowKind) -> None:
    inputs = events(seed=3)
    want = expected(kind, inputs)
    whole = run_task(committing(kind), inputs, stores={"w": None})
    assert windows_of(whole) == want
    records = len(inputs)
    for crash_after in (COMMIT_EVERY * 3 + 4, COMMIT_EVERY * 9 + 1, records // 2 + 3,
                        records - 5):
        crashed = run_task(committing(kind), inputs, stores={"w": None},
                           crash_after=crash_after)
        assert table(crashed) == table(whole), f"crash after {crash_after} records"
        assert windows_of(crashed) == want


@pytest.mark.parametrize("kind", [Tumbling(size_ms=50, grace_ms=100),
                                  Session(gap_ms=15, grace_ms=100)],
                         ids=["tumbling", "session"])
def test_states_in_memory_only_are_written_when_the_cache_overflows(
        kind: WindowKind, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keyed, "CACHED_KEYS", 2)  # four keys: the cache keeps clearing
    inputs = events(seed=4)
    whole = run_task(committing(kind), inputs, stores={"w": None})
    assert windows_of(whole) == expected(kind, inputs)
    crashed = run_task(committing(kind), inputs, stores={"w": None},
                       crash_after=COMMIT_EVERY * 6 + 3)
    assert table(crashed) == table(whole)


class CommittingJoin(CommitsEvery, JoinTask):
    def __init__(self) -> None:
        super().__init__(how="left", grace_ms=30)


def test_a_crash_between_commits_joins_every_pair_exactly() -> None:
    rng = random.Random(5)
    inputs: list[tuple[Any, ...]] = []
    for n in range(150):
        side = left if rng.random() < 0.5 else right
        inputs.append(side(rng.choice(KEYS), n * 4 + rng.randrange(0, 20)))
    inputs += marks(10**9)
    sides: dict[str, list[tuple[str, int]]] = {"local.left": [], "local.right": []}
    for stream, key, value, _ in inputs:
        if "ts" in value:
            sides[stream].append((key, value["ts"]))
    want: Counter[tuple[Any, ...]] = Counter()
    for key, tl in sides["local.left"]:
        joined = [tr for k, tr in sides["local.right"] if k == key and tl - 10 <= tr <= tl + 10]
        for tr in joined:
            want[(key, tl, tr)] += 1
        if not joined:
            want[(key, tl, None)] += 1
    whole = run_task(CommittingJoin, inputs, stores={"j": None})
    assert Counter(pairs(whole)) == want
    for crash_after in (COMMIT_EVERY * 4 + 2, len(inputs) // 2 + 1, len(inputs) - 3):
        crashed = run_task(CommittingJoin, inputs, stores={"j": None},
                           crash_after=crash_after)
        assert pairs(crashed) == pairs(whole), f"crash after {crash_after} records"


def test_states_reach_the_store_at_the_drain_once_per_key_with_the_latest_state() -> None:
    context, sent = Context(), Sent()
    windows = Windows(context, "w", Tumbling(size_ms=100), count())  # type: ignore[arg-type]
    store = context.state
    store.apply(store.drain(), None)  # what init wrote (the windows' shape)
    for offset in range(30):
        windows.process(envelope("a" if offset % 3 else "b", offset, offset), sent)
    assert store.buffered == 0  # nothing written per record
    items = store.drain()
    assert {key: load_state(JsonSerde().from_bytes(value)) for key, value in items.items()
            if value is not None} == {b"k|sa": [0, 20], b"k|sb": [0, 10]}
    store.apply(items, None)
    assert store.drain() == {}  # nothing changed since: nothing to write
    windows.process(envelope("a", 40, 30), sent)
    assert [(key, load_state(value)) for key, value in store.prefix("k|")] == [
        ("k|sa", [0, 21]), ("k|sb", [0, 10])]  # a range read sees the state in memory


def test_a_state_json_cannot_hold_fails_the_commit_naming_the_key() -> None:
    kind = Tumbling(size_ms=100)
    as_set = fold(set(), lambda seen, value: seen | {value["ts"]}, name="set")
    with pytest.raises(WindowError, match=r"store 'w', key 'a': a window or join state "
                                          r"cannot be stored as JSON"):
        run_task(WindowTask(kind, as_set), [ev("a", 1), ev("a", 2)], stores={"w": None})



def test_windows_made_anew_over_the_same_store_take_over_the_states_in_memory() -> None:
    # A task initialised anew over open stores (a job model taken in place): the new
    # Windows reads what the old one held in memory only, and the old one is let go.
    context, sent = Context(), Sent()
    old = Windows(context, "w", Tumbling(size_ms=100), count())  # type: ignore[arg-type]
    for offset in range(5):
        old.process(envelope("a", offset, offset), sent)
    gone = weakref.ref(old)
    del old
    new = Windows(context, "w", Tumbling(size_ms=100), count())  # type: ignore[arg-type]
    new.process(envelope("a", 5, 5), sent)
    gc.collect()
    assert gone() is None
    assert [(key, load_state(value)) for key, value in context.state.prefix("k|")] == [
        ("k|sa", [0, 6])]


def test_a_key_made_and_emptied_between_two_commits_writes_nothing() -> None:
    # Its state never reached the store, so deleting it would only write a tombstone;
    # a key whose state was committed is deleted as before.
    context, sent = Context(), Sent()
    windows = Windows(context, "w", Tumbling(size_ms=100), count())  # type: ignore[arg-type]
    store = context.state
    windows.process(envelope("a", 10, 0), sent)
    store.apply(store.drain(), None)  # a's state is committed
    windows.process(envelope("b", 20, 1), sent)  # b's is only in memory
    windows.process(envelope("c", 250, 2), sent)  # closes [0, 100) of a and b
    windows.process(envelope("c", 380, 3), sent)  # the next close deletes what it emptied
    items = store.drain()
    assert {key: value for key, value in items.items() if key.startswith(b"k|")} == {
        b"k|sa": None, b"k|sc": JsonSerde().to_bytes("[300,1]")}
    assert [key for key, _ in store.prefix("k|")] == ["k|sc"]


def test_under_a_journal_states_are_written_at_once_and_windows_still_close() -> None:
    # The skip and dead-letter process policies journal the store's writes: every
    # record's state goes to the store at once, and a close rebuilds the due index from
    # the store (it once failed there, on the set of stored keys it does not keep then).
    context, sent = Context(), Sent()
    windows = Windows(context, "w", Tumbling(size_ms=100), count(),  # type: ignore[arg-type]
                      output="local.out")
    context.state.journal = []
    for offset, (key, ts) in enumerate([("a", 10), ("b", 20), ("a", 30), ("c", 250)]):
        windows.process(envelope(key, ts, offset), sent)
    assert [(key, load_state(value)) for key, value in context.state.prefix("k|")] == [
        ("k|sc", [200, 1])]
    assert sent.sent == [("local.out", "a", {"start": 0, "end": 100, "value": 2,
                                             "final": True}),
                         ("local.out", "b", {"start": 0, "end": 100, "value": 1,
                                             "final": True})]
