"""Property: for random event streams (keys, event times, partitions, arrival order), the
windows emitted equal a brute-force recomputation from the records that were on time."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from wtasks import ev, mark, run, table

from framework.windows import (
    Hopping,
    Session,
    Tumbling,
    aggregate,
    count,
    fold,
    max_of,
    mean_of,
    min_of,
    sum_of,
)

END = 10**6
Event = tuple[str, int, int]  # key, ts, partition


def on_time(events: list[Event], partitions: int, grace: int) -> tuple[list[Event], int]:
    """The records that are not late, replaying the watermark rule naively."""
    times: dict[int, int] = {}
    watermark: int | None = None
    kept, late = [], 0
    for key, ts, partition in events:
        if watermark is not None and ts < watermark - grace:
            late += 1
            continue
        kept.append((key, ts, partition))
        times[partition] = max(times.get(partition, ts), ts)
        if len(times) == partitions:
            watermark = max(watermark or 0, min(times.values()))
    return kept, late


def brute_fixed(events: list[Event], size: int, advance: int) -> Counter[tuple[Any, ...]]:
    counts: Counter[tuple[Any, ...]] = Counter()
    for key, ts, _ in events:
        for start in range(0, ts + 1, advance):
            if start <= ts < start + size:
                counts[(key, start, start + size)] += 1
    return counts


def brute_sessions(events: list[Event], gap: int) -> Counter[tuple[Any, ...]]:
    counts: Counter[tuple[Any, ...]] = Counter()
    for key in {k for k, _, _ in events}:
        times = sorted(ts for k, ts, _ in events if k == key)
        group = [times[0]]
        for ts in times[1:]:
            if ts - group[-1] > gap:
                counts[(key, group[0], group[-1] + 1)] = len(group)
                group = []
            group.append(ts)
        counts[(key, group[0], group[-1] + 1)] = len(group)
    return counts


events = st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 200), st.integers(0, 2)),
                  max_size=40)


def emitted(kind: Any, stream: list[Event], partitions: int) -> tuple[Counter[Any], int]:
    inputs = [ev(key, ts, p) for key, ts, p in stream]
    inputs += [mark(END, p) for p in range(partitions)]
    result, _ = run(kind, inputs)
    rows = table(result)
    assert len(rows) == len(set((k, s, e) for k, s, e, _ in rows)), "a window emitted twice"
    return Counter({(k, s, e): v for k, s, e, v in rows}), result.stores["w"].get("late", 0)


@settings(max_examples=60, deadline=None)
@given(stream=events, partitions=st.integers(1, 3), size=st.integers(1, 40),
       hops=st.integers(1, 4), grace=st.integers(0, 30))
def test_hopping_and_tumbling_counts_equal_brute_force(
        stream: list[Event], partitions: int, size: int, hops: int, grace: int) -> None:
    stream = [(k, ts, p % partitions) for k, ts, p in stream]
    kept, late = on_time(stream, partitions, grace)
    advance = max(1, size // hops)
    got, counted = emitted(Hopping(size_ms=size, advance_ms=advance, grace_ms=grace),
                           stream, partitions)
    assert (got, counted) == (brute_fixed(kept, size, advance), late)
    got, counted = emitted(Tumbling(size_ms=size, grace_ms=grace), stream, partitions)
    assert (got, counted) == (brute_fixed(kept, size, size), late)


@settings(max_examples=60, deadline=None)
@given(stream=events, partitions=st.integers(1, 3), gap=st.integers(1, 30),
       grace=st.integers(0, 30))
def test_session_counts_equal_brute_force(
        stream: list[Event], partitions: int, gap: int, grace: int) -> None:
    stream = [(k, ts, p % partitions) for k, ts, p in stream]
    kept, late = on_time(stream, partitions, grace)
    got, counted = emitted(Session(gap_ms=gap, grace_ms=grace), stream, partitions)
    assert (got, counted) == (brute_sessions(kept, gap) if kept else Counter(), late)


# -- several reducers at once: every result of every window equals brute force ---------------

STATS = aggregate(n=count(), total=sum_of("v"), low=min_of("v"), high=max_of("v"),
                  mean=mean_of("v"))
NO_MERGE = aggregate(n=count(), seen=fold([], lambda seen, value: sorted([*seen, value["v"]])))
Valued = tuple[str, int, int, int]  # key, ts, partition, value


def stats_of(values: list[int]) -> dict[str, Any]:
    return {"n": len(values), "total": sum(values), "low": min(values), "high": max(values),
            "mean": sum(values) / len(values)}


def brute_stats(events: list[Valued], size: int, advance: int | None, gap: int | None
                ) -> dict[tuple[Any, ...], list[int]]:
    """(key, start, end) → the values in that window (fixed windows or sessions)."""
    found: dict[tuple[Any, ...], list[int]] = {}
    if gap is None:
        assert advance is not None
        for key, ts, _, value in events:
            for start in range(0, ts + 1, advance):
                if start <= ts < start + size:
                    found.setdefault((key, start, start + size), []).append(value)
        return found
    for key in sorted({k for k, *_ in events}):
        times = sorted((ts, value) for k, ts, _, value in events if k == key)
        group = [times[0]]
        for ts, value in times[1:]:
            if ts - group[-1][0] > gap:
                found[(key, group[0][0], group[-1][0] + 1)] = [v for _, v in group]
                group = []
            group.append((ts, value))
        found[(key, group[0][0], group[-1][0] + 1)] = [v for _, v in group]
    return found


valued = st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 200), st.integers(0, 2),
                            st.integers(-5, 50)), max_size=40)


def emitted_stats(kind: Any, reducer: Any, stream: list[Valued], partitions: int
                  ) -> tuple[dict[tuple[Any, ...], Any], int]:
    inputs = [ev(key, ts, p, v=value) for key, ts, p, value in stream]
    inputs += [mark(END, p) for p in range(partitions)]
    result, _ = run(kind, inputs, reducer=reducer)
    rows = table(result)
    assert len(rows) == len({(k, s, e) for k, s, e, _ in rows}), "a window emitted twice"
    return {(k, s, e): v for k, s, e, v in rows}, result.stores["w"].get("late", 0)


@settings(max_examples=60, deadline=None)
@given(stream=valued, partitions=st.integers(1, 3), size=st.integers(1, 40),
       hops=st.integers(1, 4), grace=st.integers(0, 30), panes=st.booleans())
def test_aggregate_of_every_fixed_window_equals_brute_force(
        stream: list[Valued], partitions: int, size: int, hops: int, grace: int,
        panes: bool) -> None:
    stream = [(k, ts, p % partitions, v) for k, ts, p, v in stream]
    advance = max(1, size // hops)
    if panes:
        size = advance * hops  # a multiple: kept as panes; otherwise window by window
    kept_values = on_time_values(stream, partitions, grace)
    late = len(stream) - len(kept_values)
    want = {window: stats_of(values)
            for window, values in brute_stats(kept_values, size, advance, None).items()}
    got, counted = emitted_stats(Hopping(size_ms=size, advance_ms=advance, grace_ms=grace),
                                 STATS, stream, partitions)
    assert (got, counted) == (want, late)
    seen = {window: {"n": len(values), "seen": sorted(values)}
            for window, values in brute_stats(kept_values, size, advance, None).items()}
    got, counted = emitted_stats(Hopping(size_ms=size, advance_ms=advance, grace_ms=grace),
                                 NO_MERGE, stream, partitions)
    assert (got, counted) == (seen, late)


@settings(max_examples=60, deadline=None)
@given(stream=valued, partitions=st.integers(1, 3), gap=st.integers(1, 30),
       grace=st.integers(0, 30))
def test_aggregate_of_every_session_equals_brute_force(
        stream: list[Valued], partitions: int, gap: int, grace: int) -> None:
    stream = [(k, ts, p % partitions, v) for k, ts, p, v in stream]
    kept_values = on_time_values(stream, partitions, grace)
    late = len(stream) - len(kept_values)
    want = {window: stats_of(values) for window, values in
            (brute_stats(kept_values, 0, None, gap) if kept_values else {}).items()}
    got, counted = emitted_stats(Session(gap_ms=gap, grace_ms=grace), STATS, stream,
                                 partitions)
    assert (got, counted) == (want, late)


def on_time_values(events: list[Valued], partitions: int, grace: int) -> list[Valued]:
    """The records that are not late (`on_time`, keeping each record's value)."""
    times: dict[int, int] = {}
    watermark: int | None = None
    kept = []
    for key, ts, partition, value in events:
        if watermark is not None and ts < watermark - grace:
            continue
        kept.append((key, ts, partition, value))
        times[partition] = max(times.get(partition, ts), ts)
        if len(times) == partitions:
            watermark = max(watermark or 0, min(times.values()))
    return kept


@settings(max_examples=60, deadline=None)
@given(stream=events, size=st.integers(1, 40), hops=st.integers(1, 4))
def test_hopping_updates_equal_brute_force_after_every_record(
        stream: list[Event], size: int, hops: int) -> None:
    """``emit="update"``: after each on-time record, the windows holding it, with what
    they counted so far (one partition, grace past every record: none is late)."""
    advance = max(1, size // hops)  # panes when it divides the size, else per window
    inputs = [ev(key, ts) for key, ts, _ in stream]
    result, _ = run(Hopping(size_ms=size, advance_ms=advance, grace_ms=10**4),
                    [*inputs, mark(END)], emit="update")
    updates = [row[:4] for row in table(result) if row[4:] == ("update",)]
    want: list[tuple[Any, ...]] = []
    seen: list[Event] = []
    for key, ts, _ in stream:
        seen.append((key, ts, 0))
        counts = brute_fixed([event for event in seen if event[0] == key], size, advance)
        want += sorted((k, start, end, n) for (k, start, end), n in counts.items()
                       if start <= ts < end)
    assert updates == want
