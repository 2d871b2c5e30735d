"""The results of one close come in order of closing time, then key (its store-key text),
for every layout — also when a watermark jump closes several windows of a key at once —
and each close emits what a brute-force recomputation says; the join's unjoined left
records come by expiry time, then key, then arrival."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from wtasks import Context, Sent

from framework.api import Envelope
from framework.config.serdes import JsonSerde, StringSerde
from framework.stores.buffer import TaskStore
from framework.stores.memory import MemoryEngine
from framework.windows import (
    Hopping,
    IntervalJoin,
    Session,
    Tumbling,
    Windows,
    aggregate,
    count,
    max_of,
    mean_of,
)
from framework.windows.kinds import WindowKind
from framework.windows.state import key_text
from groupers import SystemStreamPartition

VIEWS = SystemStreamPartition("local", "views", 0)
KINDS: list[WindowKind] = [Tumbling(size_ms=10), Hopping(size_ms=30, advance_ms=10),
                           Hopping(size_ms=25, advance_ms=10), Session(gap_ms=7)]
keys = st.sampled_from(["a", "b", "c", "ab", 3, 12, b"\x01"])
records = st.lists(st.tuples(keys, st.integers(0, 300), st.integers(0, 9)), max_size=40)


def closes_at(kind: WindowKind, end: int) -> int:
    return end + kind.gap_ms if isinstance(kind, Session) else end


@settings(max_examples=150, deadline=None)
@given(stream=records, which=st.integers(0, 3), four=st.booleans())
def test_each_close_comes_by_closing_time_then_key(
        stream: list[tuple[Any, int, int]], which: int, four: bool) -> None:
    kind = KINDS[which]
    reducer = aggregate(n=count(), top=max_of("x"), avg=mean_of("x")) if four else count()
    windows = Windows(Context(), "w", kind, reducer)
    sent = Sent()
    emitted: list[Any] = []
    for offset, (key, ts, x) in enumerate(stream):
        results = windows.process(Envelope(VIEWS, offset, key, {"x": x}, ts), sent)
        order = [(closes_at(kind, r.end), key_text(r.key)) for r in results]
        assert order == sorted(order) and len(set(order)) == len(order)
        emitted += results
    results = windows.process(Envelope(VIEWS, len(stream), "~wm", {"watermark": 10**6}, 0),
                              sent)
    order = [(closes_at(kind, r.end), key_text(r.key)) for r in results]
    assert order == sorted(order)
    emitted += results
    windows_of = Counter((key_text(r.key), r.start, r.end) for r in emitted)
    assert max(windows_of.values(), default=1) == 1, "a window emitted twice"
    on_time = _on_time(stream, kind.grace_ms)
    assert {(key_text(r.key), r.start, r.end): (r.value if not four else r.value["n"])
            for r in emitted} == _brute(kind, on_time)


def _on_time(stream: list[tuple[Any, int, int]], grace: int) -> list[tuple[Any, int]]:
    high: int | None = None
    kept = []
    for key, ts, _ in stream:
        if high is not None and ts < high - grace:
            continue
        kept.append((key, ts))
        high = ts if high is None else max(high, ts)
    return kept


def _brute(kind: WindowKind, records: list[tuple[Any, int]]) -> dict[tuple[str, int, int], int]:
    """Count per window of each key, from the kind's definition."""
    counts: Counter[tuple[str, int, int]] = Counter()
    if isinstance(kind, Session):
        for text in {key_text(k) for k, _ in records}:
            times = sorted(ts for k, ts in records if key_text(k) == text)
            group = [times[0]]
            for ts in [*times[1:], None]:
                if ts is None or ts - group[-1] > kind.gap_ms:
                    counts[(text, group[0], group[-1] + 1)] = len(group)
                    group = []
                if ts is not None:
                    group.append(ts)
        return dict(counts)
    for key, ts in records:
        for start in range(0, ts + 1, kind.advance_ms):
            if start <= ts < start + kind.size_ms:
                counts[(key_text(key), start, start + kind.size_ms)] += 1
    return dict(counts)


class JoinContext(Context):
    """`Context` with the join's two inputs, one partition each."""

    def __init__(self) -> None:
        super().__init__()
        self.ssps = frozenset({LEFT, RIGHT})
        self.config = type("Config", (), {"inputs": ["local.left", "local.right"],
                                          "stores": {}})()
        self.state = TaskStore("j", MemoryEngine(), StringSerde(), JsonSerde(), 1000)


LEFT = SystemStreamPartition("local", "left", 0)
RIGHT = SystemStreamPartition("local", "right", 0)


@settings(max_examples=150, deadline=None)
@given(stream=st.lists(st.tuples(st.booleans(), keys, st.integers(0, 300)), max_size=40))
def test_unjoined_left_records_come_by_expiry_then_key_then_arrival(
        stream: list[tuple[bool, Any, int]]) -> None:
    join = IntervalJoin(JoinContext(), "j", left="local.left", right="local.right",
                        before_ms=5, after_ms=5, how="left")
    sent = Sent()
    unjoined: list[Any] = []
    for offset, (is_left, key, ts) in enumerate(stream):
        envelope = Envelope(LEFT if is_left else RIGHT, offset, key, {"n": offset}, ts)
        unjoined += _checked([r for r in join.process(envelope, sent) if r.right is None])
    for n, ssp in enumerate((LEFT, RIGHT)):
        final = join.process(Envelope(ssp, len(stream) + n, "~wm", {"watermark": 10**6}, 0),
                             sent)
        unjoined += _checked([r for r in final if r.right is None])
    assert sorted((key_text(r.key), r.left_ts, r.left["n"]) for r in unjoined) == _brute_unjoined(
        stream, before=5, after=5)


def _brute_unjoined(stream: list[tuple[bool, Any, int]], *, before: int, after: int
                    ) -> list[tuple[str, int, int]]:
    """The on-time left records no on-time right record joins (grace 0: late is behind
    the least partition time, once both partitions delivered)."""
    times: dict[bool, int] = {}
    watermark: int | None = None
    on_time = []
    for n, (is_left, key, ts) in enumerate(stream):
        if watermark is not None and ts < watermark:
            continue
        on_time.append((is_left, key_text(key), ts, n))
        times[is_left] = max(times.get(is_left, ts), ts)
        if len(times) == 2:
            watermark = max(watermark or 0, min(times.values()))
    rights = [(text, ts) for is_left, text, ts, _ in on_time if not is_left]
    return sorted((text, tl, n) for is_left, text, tl, n in on_time if is_left and not any(
        text == other and tl - before <= tr <= tl + after for other, tr in rights))


def _checked(unjoined: list[Any]) -> list[Any]:
    order = [(r.left_ts, key_text(r.key), r.left["n"]) for r in unjoined]
    assert order == sorted(order)
    return unjoined
