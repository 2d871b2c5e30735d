"""Exact window tables per kind: boundaries, grace, late records, out-of-order input,
reducers, emission on update and the late-record policies (in memory, via run_task)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from wtasks import WindowTask, ev, mark, run, table

from framework.testing import run_task
from framework.windows import (
    EventTime,
    Hopping,
    Reducer,
    Session,
    Tumbling,
    WindowError,
    Windows,
    aggregate,
    count,
    fold,
    layouts,
    max_of,
    mean_of,
    min_of,
    sum_of,
)


def test_tumbling_boundaries_end_is_exclusive_and_closes_at_the_watermark() -> None:
    result, _ = run(Tumbling(size_ms=10), [
        ev("a", 0), ev("b", 5), ev("a", 9),
        ev("a", 10),            # W=10: [0,10) closes; a@10 is in [10,20)
        ev("b", 3),             # 3 < W - grace: late
        ev("a", 25),            # W=25: [10,20) closes
        mark(100)])             # closes the rest
    assert table(result) == [("a", 0, 10, 2), ("b", 0, 10, 1), ("a", 10, 20, 1),
                             ("a", 20, 30, 1)]
    assert result.stores["w"]["late"] == 1


def test_tumbling_grace_accepts_out_of_order_records_within_it() -> None:
    result, _ = run(Tumbling(size_ms=10, grace_ms=5), [
        ev("a", 1), ev("a", 12),  # W=12 < 10 + 5: [0,10) stays open
        ev("a", 7),               # 5 behind the watermark: on time
        ev("a", 6),               # 6 behind: late
        ev("a", 15),              # W=15: [0,10) closes
        mark(100)])
    assert table(result) == [("a", 0, 10, 2), ("a", 10, 20, 2)]
    assert result.stores["w"]["late"] == 1


def test_hopping_record_falls_in_size_over_advance_windows() -> None:
    result, _ = run(Hopping(size_ms=10, advance_ms=5), [
        ev("a", 3), ev("a", 7), ev("a", 12),  # W=12: [0,10) closes
        mark(100)])
    assert table(result) == [("a", 0, 10, 2), ("a", 5, 15, 2), ("a", 10, 20, 1)]


def test_hopping_windows_before_the_epoch_are_left_out() -> None:
    assert Hopping(size_ms=300, advance_ms=100).starts(50) == [0]
    assert Hopping(size_ms=300, advance_ms=100).starts(299) == [0, 100, 200]
    assert Hopping(size_ms=300, advance_ms=100).starts(300) == [100, 200, 300]


def test_session_windows_close_after_gap_and_merge_across_a_bridging_record() -> None:
    result, _ = run(Session(gap_ms=5), [
        ev("a", 1), ev("a", 4),
        ev("a", 20),              # W=20 >= 4 + 5 + 1: session [1, 4] closes
        ev("a", 12),              # late
        ev("b", 21), ev("a", 23), # a@23 joins a@20 (3 apart)
        ev("a", 30),              # 7 after a@23: a new session; W=30 closes b (27), a (29)
        mark(100)])
    assert table(result) == [("a", 1, 5, 2), ("b", 21, 22, 1), ("a", 20, 24, 2),
                             ("a", 30, 31, 1)]
    assert result.stores["w"]["late"] == 1


def test_session_record_within_gap_of_two_sessions_merges_them() -> None:
    result, _ = run(Session(gap_ms=5, grace_ms=10), [
        ev("a", 40), ev("a", 50),  # 10 apart: two sessions
        ev("a", 45),               # 5 from both: one session of 3
        mark(100)])
    assert table(result) == [("a", 40, 51, 3)]


def test_session_grace_keeps_a_session_open_for_out_of_order_records() -> None:
    result, _ = run(Session(gap_ms=5, grace_ms=10), [
        ev("a", 1), ev("a", 15),  # W=15 < 1 + 6 + 10: [1,1] stays open
        ev("a", 6),               # 9 behind the watermark: joins [1,1] (5 apart)
        mark(100)])
    assert table(result) == [("a", 1, 7, 2), ("a", 15, 16, 1)]


def test_reducers_sum_min_max_and_a_custom_fold() -> None:
    inputs = [ev("a", 1, n=4), ev("a", 2, n=9), ev("a", 3, n=2), mark(10)]
    for reducer, value in [(sum_of("n"), 15), (min_of("n"), 2), (max_of("n"), 9),
                           (sum_of(lambda v: v["n"] * 10), 150),
                           (fold([], lambda seen, v: [*seen, v["n"]]), [4, 9, 2])]:
        result, _ = run(Tumbling(size_ms=10), inputs, reducer=reducer)
        assert table(result) == [("a", 0, 10, value)], reducer.name


def test_session_merge_needs_a_merge_function() -> None:
    merged, _ = run(Session(gap_ms=5, grace_ms=10),
                    [ev("a", 0, n=1), ev("a", 10, n=2), ev("a", 5, n=3), mark(100)],
                    reducer=fold([], lambda s, v: sorted([*s, v["n"]]),
                                 merge=lambda x, y: sorted(x + y)))
    assert table(merged) == [("a", 0, 11, [1, 2, 3])]
    with pytest.raises(WindowError, match="has no merge; pass fold"):
        run(Session(gap_ms=5), [ev("a", 0)], reducer=fold(0, lambda s, v: s + 1))


def test_emit_on_update_sends_every_change_then_the_final_result() -> None:
    result, _ = run(Tumbling(size_ms=10), [ev("a", 1), ev("a", 2), mark(10)], emit="update")
    assert table(result) == [("a", 0, 10, 1, "update"), ("a", 0, 10, 2, "update"),
                             ("a", 0, 10, 2)]


def test_late_policies_count_dead_letter_and_drop() -> None:
    inputs = [ev("a", 20), ev("a", 3), mark(100)]
    counted, _ = run(Tumbling(size_ms=10), inputs)
    assert counted.stores["w"]["late"] == 1 and counted.sent_to("local.late") == []
    lettered, _ = run(Tumbling(size_ms=10), inputs, late="dead-letter",
                      late_stream="local.late")
    [letter] = lettered.sent_to("local.late")
    assert (letter.key, letter.value) == ("a", {
        "stream": "local.views", "partition": 0, "offset": 1, "ts": 3, "watermark": 20,
        "grace_ms": 0, "value": {"ts": 3}})
    dropped, _ = run(Tumbling(size_ms=10), inputs, late="drop")
    assert "late" not in dropped.stores["w"]
    assert table(counted) == table(lettered) == table(dropped) == [("a", 20, 30, 1)]


def test_every_input_partition_holds_the_watermark_until_it_delivered() -> None:
    result, _ = run(Tumbling(size_ms=10), [
        ev("a", 1, 0), ev("a", 50, 0),  # partition 1 has delivered nothing: no close
        ev("b", 2, 1),                  # W = min(50, 2) = 2
        ev("b", 30, 1),                 # W = 30: [0,10) and [10,20) close
        mark(100, 0), mark(100, 1)])
    assert table(result) == [("a", 0, 10, 1), ("b", 0, 10, 1), ("b", 30, 40, 1),
                             ("a", 50, 60, 1)]


def test_markers_source_moves_time_only_on_watermark_records() -> None:
    result, task = run(Tumbling(size_ms=10), [ev("a", 1), ev("a", 25), mark(9), ev("a", 9),
                                              mark(10)], source="markers", windows=1)
    assert table(result) == [("a", 0, 10, 2)]  # a@9 is on time: the marker said 9
    assert task.times[-1].watermark_ms == 10
    assert result.stores["w"]["t~watermark"] == 10


def test_window_receives_wall_clock_and_watermark() -> None:
    _, task = run(Tumbling(size_ms=10), [ev("a", 1), ev("a", 42)], windows=2)
    assert [t.watermark_ms for t in task.times] == [42, 42]
    assert all(t.wall_ms > 1_600_000_000_000 for t in task.times)


def test_state_is_expired_when_windows_close() -> None:
    result, _ = run(Hopping(size_ms=10, advance_ms=5), [ev("a", 1), ev("b", 2), mark(100)])
    assert {k: v for k, v in result.stores["w"].items() if not k.startswith("t")} == {
        "a~windows": "count over hopping 10/5 in panes", "a~closed": 100}  # no window left


def test_resuming_from_stored_state_continues_the_open_windows() -> None:
    first, _ = run(Tumbling(size_ms=10), [ev("a", 1), ev("a", 12)])
    assert table(first) == [("a", 0, 10, 1)]
    second, _ = run(Tumbling(size_ms=10), [ev("a", 3), ev("a", 15), mark(100)],
                    stores={"w": first.stores["w"]})
    assert table(second) == [("a", 10, 20, 2)]  # a@3 is late after the restart too
    assert second.stores["w"]["late"] == 1


def test_bad_definitions_name_the_fix() -> None:
    with pytest.raises(WindowError, match="advance_ms <= size_ms"):
        Hopping(size_ms=5, advance_ms=10)
    with pytest.raises(WindowError, match="size_ms must be a positive"):
        Tumbling(size_ms=0)
    with pytest.raises(WindowError, match="grace_ms must be >= 0"):
        Session(gap_ms=5, grace_ms=-1)
    with pytest.raises(WindowError, match="needs late_stream="):
        run(Tumbling(size_ms=10), [ev("a", 1)], late="dead-letter")
    with pytest.raises(WindowError, match=r"event time -5 is not a number"):
        run(Tumbling(size_ms=10), [ev("a", -5)])
    assert {EventTime, Windows, count}  # the public names import


def test_a_window_store_must_have_string_keys(tmp_path: Path) -> None:
    job = tmp_path / "job.toml"
    job.write_text('[job]\nname = "w"\ntask = "x:Y"\ninputs = ["local.views"]\n'
                   '[systems.local]\ntype = "local"\n[streams."local.views"]\n'
                   '[streams."local.out"]\n[stores.w]\nkey_serde = "json"\n')
    with pytest.raises(WindowError, match=r"store 'w' holds windows, which need string keys"):
        run_task(WindowTask(Tumbling(size_ms=10)), [ev("a", 1)], config=job)


def test_window_signature_decides_whether_times_are_passed() -> None:
    from framework import StreamTask

    seen: list[Any] = []

    class Plain(StreamTask):
        def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
            pass

        def window(self, collector: Any, coordinator: Any) -> None:
            seen.append("plain")

    class Timed(Plain):
        async def window(self, collector: Any, coordinator: Any, times: Any) -> None:
            seen.append(times.watermark_ms)  # no EventTime in this task: None

    run_task(Plain, [("local.views", "a", {})], windows=1)
    run_task(Timed, [("local.views", "a", {})], windows=1)
    assert seen == ["plain", None]


# -- several reducers in one pass (aggregate) ------------------------------------------------


def test_aggregate_emits_every_named_result_per_window() -> None:
    stats = aggregate(views=count(), spent=sum_of("n"), top=max_of("n"), low=min_of("n"),
                      avg=mean_of("n"))
    result, _ = run(Hopping(size_ms=10, advance_ms=5), [
        ev("a", 1, n=4), ev("a", 6, n=9), ev("b", 7, n=5), ev("a", 12, n=2), mark(100)],
        reducer=stats)
    assert table(result) == [
        ("a", 0, 10, {"views": 2, "spent": 13, "top": 9, "low": 4, "avg": 6.5}),
        ("b", 0, 10, {"views": 1, "spent": 5, "top": 5, "low": 5, "avg": 5.0}),
        ("a", 5, 15, {"views": 2, "spent": 11, "top": 9, "low": 2, "avg": 5.5}),
        ("b", 5, 15, {"views": 1, "spent": 5, "top": 5, "low": 5, "avg": 5.0}),
        ("a", 10, 20, {"views": 1, "spent": 2, "top": 2, "low": 2, "avg": 2.0})]


def test_aggregate_as_a_dict_and_in_one_store_value() -> None:
    result, _ = run(Tumbling(size_ms=10), [ev("a", 1, n=4), ev("a", 2, n=3)],
                    reducer={"views": count(), "spent": sum_of("n")})  # type: ignore[arg-type]
    assert result.stores["w"]["k|sa"] == "[0,2,7]"  # one pane: its start, count, sum
    assert result.stores["w"]["a~windows"] == (
        "aggregate(views=count, spent=sum) over tumbling 10 in columns")


def test_a_store_from_before_columns_keeps_its_panes_until_its_windows_close(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An aggregate's open windows written as panes with a list per pane (before columns)
    are read and closed as they are, and their results are the same as if columns had
    kept them; the first start with no window open moves the store to columns."""
    stats = {"views": count(), "spent": sum_of("n"), "avg": mean_of("n")}
    kind = Hopping(size_ms=10, advance_ms=5)
    before, after = [ev("a", 1, n=4), ev("a", 12, n=2)], [ev("a", 13, n=6), mark(100)]
    with monkeypatch.context() as old_code:
        old_code.setattr(layouts, "columns_fit", lambda reducer: False)
        first, _ = run(kind, before, reducer=stats)
    stored = first.stores["w"]
    assert stored["k|sa"] == "[10,[1,2,[2,1]]]"  # the pane [10, 15) of a@12
    assert stored["a~windows"].endswith(" in panes")
    second, _ = run(kind, after, reducer=stats, stores={"w": stored})
    assert second.stores["w"]["a~windows"].endswith(" in panes")  # opened in panes
    in_columns, _ = run(kind, before + after, reducer=stats)
    assert table(first) + table(second) == table(in_columns) == [
        ("a", 0, 10, {"views": 1, "spent": 4, "avg": 4.0}),
        ("a", 5, 15, {"views": 2, "spent": 8, "avg": 4.0}),
        ("a", 10, 20, {"views": 2, "spent": 8, "avg": 4.0})]
    third, _ = run(kind, [ev("a", 120, n=5)], reducer=stats, stores={"w": second.stores["w"]})
    assert third.stores["w"]["a~windows"].endswith(" in columns")
    assert third.stores["w"]["k|sa"] == "[120,1,5,5,1]"


def test_aggregate_merges_sessions_and_updates_by_name() -> None:
    stats = aggregate(views=count(), pages=fold([], lambda s, v: sorted({*s, v["p"]}),
                                                merge=lambda x, y: sorted({*x, *y})))
    result, _ = run(Session(gap_ms=5, grace_ms=10), [
        ev("a", 0, p="/x"), ev("a", 10, p="/y"), ev("a", 5, p="/x"), mark(100)],
        reducer=stats, emit="update")
    assert table(result) == [
        ("a", 0, 1, {"views": 1, "pages": ["/x"]}, "update"),
        ("a", 10, 11, {"views": 1, "pages": ["/y"]}, "update"),
        ("a", 0, 11, {"views": 3, "pages": ["/x", "/y"]}, "update"),
        ("a", 0, 11, {"views": 3, "pages": ["/x", "/y"]})]


def _fold_all(reducer: Reducer, values: list[Any]) -> Any:
    aggregate_ = reducer.start(values[0])
    for value in values[1:]:
        aggregate_ = reducer.add(aggregate_, value)
    return aggregate_


@pytest.mark.parametrize("read", ["fields", "values"])
def test_aggregate_computes_what_each_of_its_reducers_computes_alone(read: str) -> None:
    """`aggregate` runs built-in reducers as generated code and others by their functions:
    its start, add, merge and result agree with each reducer's own, whether a reducer
    reads a field, a function of the value or the value itself."""
    if read == "fields":
        parts = {"n": count(), "s": sum_of("x"), "lo": min_of(lambda v: v["x"] * 2),
                 "hi": max_of("x"), "m": mean_of(lambda v: v["x"]),
                 "seen": fold([], lambda seen, v: [*seen, v["x"]],
                              merge=lambda a, b: [*a, *b])}
    else:
        parts = {"n": count(), "s": sum_of(), "lo": min_of(), "hi": max_of(),
                 "m": mean_of()}
    stats = aggregate(**parts)
    assert stats.merge is not None and stats.result is not None
    rng = random.Random(5)
    for _ in range(200):
        numbers = [rng.choice([rng.randint(-9, 9), rng.uniform(-9, 9)])
                   for _ in range(rng.randint(2, 6))]
        values = [{"x": x} for x in numbers] if read == "fields" else numbers
        cut = rng.randint(1, len(values) - 1)
        halves = [values[:cut], values[cut:]]
        alone = {name: [_fold_all(reducer, half) for half in halves]
                 for name, reducer in parts.items()}
        together = [_fold_all(stats, half) for half in halves]
        assert together == [[alone[name][i] for name in parts] for i in (0, 1)]
        merged = stats.merge(*together)
        assert merged == [reducer.merge(*alone[name])  # type: ignore[misc]
                          for name, reducer in parts.items()]
        assert stats.result(merged) == {
            name: reducer.merge(*alone[name]) if reducer.result is None  # type: ignore[misc]
            else reducer.result(reducer.merge(*alone[name]))  # type: ignore[misc]
            for name, reducer in parts.items()}
    with pytest.raises(KeyError, match="'x'"):
        aggregate(n=count(), s=sum_of("x")).add([1, 2], {"y": 1})


def test_aggregate_without_merge_keeps_per_window_state() -> None:
    stats = aggregate(views=count(), seen=fold([], lambda s, v: [*s, v["n"]]))
    result, _ = run(Hopping(size_ms=10, advance_ms=5),
                    [ev("a", 1, n=1), ev("a", 6, n=2), mark(100)], reducer=stats)
    assert table(result) == [("a", 0, 10, {"views": 2, "seen": [1, 2]}),
                             ("a", 5, 15, {"views": 1, "seen": [2]})]
    with pytest.raises(WindowError, match="has no merge"):
        run(Session(gap_ms=5), [ev("a", 0)], reducer=stats)


def test_changing_the_reducers_over_open_windows_is_refused() -> None:
    first, _ = run(Tumbling(size_ms=10), [ev("a", 1, n=4)], reducer=count())
    with pytest.raises(WindowError, match=r"holds open windows of 'count over tumbling 10 in "
                                          r"panes', but the task now aggregates "
                                          r"'aggregate\(views=count\) over tumbling 10"):
        run(Tumbling(size_ms=10), [ev("a", 2)], reducer=aggregate(views=count()),
            stores={"w": first.stores["w"]})
    closed, _ = run(Tumbling(size_ms=10), [ev("a", 1, n=4), mark(100)], reducer=count())
    changed, _ = run(Tumbling(size_ms=10), [ev("a", 102, n=1), mark(200)],
                     reducer=aggregate(views=count()), stores={"w": closed.stores["w"]})
    assert table(changed) == [("a", 100, 110, {"views": 1})]  # nothing was open: allowed
    with pytest.raises(WindowError, match="needs at least one named reducer"):
        aggregate()


def test_a_session_due_between_two_closes_survives_a_restart() -> None:
    # gap 80: session closes are handed out in steps of 10. a's session closes at 93, b's
    # at 81; a close at W = 95 emits b's and must not record a bound past a's.
    first, _ = run(Session(gap_ms=80), [ev("b", 0), ev("a", 12), mark(95)])
    second, _ = run(Session(gap_ms=80), [mark(10**6)], stores={"w": first.stores["w"]})
    assert table(first) + table(second) == [("b", 0, 1, 1), ("a", 12, 13, 1)]
