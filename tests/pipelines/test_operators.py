"""Each pipeline operator, run in process by `framework.testing.run_pipeline` (the compiled
task, the worker's commits, real serdes): the exact records it sends and the stores it
leaves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from framework.api import TaskContext
from framework.pipelines import Emit, Pipeline, Step, Stream
from framework.testing import TaskRunResult, run_pipeline
from framework.windows import Session, Tumbling, count, fold, sum_of

Event = dict[str, Any]


def sent(result: TaskRunResult, stream: str) -> list[tuple[Any, Any]]:
    return [(m.key, m.value) for m in result.sent_to(stream)]


def test_map_filter_and_map_values_apply_in_order_to_each_record() -> None:
    p = Pipeline()
    (p.source("local.in")
     .filter(lambda key, value: value["n"] % 2 == 1)
     .map(lambda key, value: (key.upper(), value["n"]))
     .map_values(lambda n: n * 10)
     .to("local.out"))
    result = run_pipeline(p, [("local.in", "a", {"n": 1}), ("local.in", "b", {"n": 2}),
                              ("local.in", "c", {"n": 3})])
    assert sent(result, "local.out") == [("A", 10), ("C", 30)]


def test_flat_map_emits_each_pair_with_the_timestamp_of_its_record() -> None:
    p = Pipeline()
    p.source("local.in").flat_map(
        lambda key, line: [(word, len(word)) for word in line.split()]).to("local.out")
    result = run_pipeline(p, [("local.in", "k", "to be", 0, 7), ("local.in", "k", "", 0, 8),
                              ("local.in", "k", "or", 0, 9)])
    assert [(m.key, m.value, m.timestamp) for m in result.sent_to("local.out")] == [
        ("to", 2, 7), ("be", 2, 7), ("or", 2, 9)]


def test_flat_map_values_keeps_the_key_of_each_record() -> None:
    p = Pipeline()
    p.source("local.in").flat_map_values(lambda values: values).to("local.out")
    result = run_pipeline(p, [("local.in", "a", [1, 2]), ("local.in", "b", [3])])
    assert sent(result, "local.out") == [("a", 1), ("a", 2), ("b", 3)]


def test_peek_sees_every_record_and_passes_it_on_unchanged() -> None:
    seen: list[tuple[str, int]] = []
    p = Pipeline()
    p.source("local.in").peek(lambda key, value: seen.append((key, value))).to("local.out")
    result = run_pipeline(p, [("local.in", "a", 1), ("local.in", "b", 2)])
    assert seen == [("a", 1), ("b", 2)]
    assert sent(result, "local.out") == [("a", 1), ("b", 2)]


def test_with_timestamp_sets_the_time_outputs_carry_and_windows_use() -> None:
    p = Pipeline()
    stamped = p.source("local.in").with_timestamp(lambda key, value: value["ts"])
    stamped.to("local.out")
    stamped.window(Tumbling(size_ms=10), count(), store="w").to("local.windows")
    result = run_pipeline(p, [("local.in", "a", {"ts": 3}), ("local.in", "a", {"ts": 12})])
    assert [m.timestamp for m in result.sent_to("local.out")] == [3, 12]
    assert sent(result, "local.windows") == [
        ("a", {"start": 0, "end": 10, "value": 1, "final": True})]


def test_branch_sends_each_record_to_the_first_predicate_it_meets_and_the_rest_last() -> None:
    p = Pipeline()
    small, medium, rest = p.source("local.in").branch(lambda key, n: n < 10,
                                                      lambda key, n: n < 100)
    small.to("local.small")
    medium.to("local.medium")
    rest.to("local.rest")
    result = run_pipeline(p, [("local.in", "a", 5), ("local.in", "b", 50),
                              ("local.in", "c", 500), ("local.in", "d", 7)])
    assert sent(result, "local.small") == [("a", 5), ("d", 7)]
    assert sent(result, "local.medium") == [("b", 50)]
    assert sent(result, "local.rest") == [("c", 500)]


def test_merge_passes_on_the_records_of_every_stream_merged() -> None:
    p = Pipeline()
    left = p.source("local.left").map_values(lambda n: f"left {n}")
    right = p.source("local.right").map_values(lambda n: f"right {n}")
    left.merge(right).to("local.out")
    result = run_pipeline(p, [("local.left", "a", 1), ("local.right", "b", 2),
                              ("local.left", "c", 3)])
    assert sent(result, "local.out") == [("a", "left 1"), ("b", "right 2"), ("c", "left 3")]


def test_partition_by_writes_the_intermediate_stream_that_the_next_stage_reads() -> None:
    p = Pipeline()
    (p.source("local.views")
     .partition_by(lambda user, view: view["page"], name="by-page")
     .count(store="views")
     .to("local.views-per-page"))
    result = run_pipeline(p, [("local.views", "u1", {"page": "home"}, 0, 5),
                              ("local.views", "u2", {"page": "faq"}, 0, 6),
                              ("local.views", "u2", {"page": "home"}, 0, 7)])
    assert [(m.key, m.value, m.timestamp) for m in
            result.sent_to("local.test-by-page-repartition")] == [
        ("home", {"page": "home"}, 5), ("faq", {"page": "faq"}, 6),
        ("home", {"page": "home"}, 7)]
    assert sent(result, "local.views-per-page") == [("home", 1), ("faq", 1), ("home", 2)]
    assert result.stores["views"] == {"faq": 1, "home": 2}


def test_aggregate_emits_each_new_aggregate_and_keeps_the_last_in_its_store() -> None:
    p = Pipeline()
    (p.source("local.in")
     .aggregate(lambda: [], lambda seen, value: [*seen, value], store="lists")
     .to("local.out"))
    result = run_pipeline(p, [("local.in", "a", 1), ("local.in", "b", 2), ("local.in", "a", 3)])
    assert sent(result, "local.out") == [("a", [1]), ("b", [2]), ("a", [1, 3])]
    assert result.stores["lists"] == {"a": [1, 3], "b": [2]}


def test_aggregate_goes_on_from_what_its_store_holds() -> None:
    p = Pipeline()
    p.source("local.in").aggregate(lambda: 0, lambda total, n: total + n,
                                   store="totals").to("local.out")
    result = run_pipeline(p, [("local.in", "a", 1)], stores={"totals": {"a": 41}})
    assert sent(result, "local.out") == [("a", 42)]


def test_reduce_starts_from_the_first_value_of_each_key() -> None:
    p = Pipeline()
    p.source("local.in").reduce(max, store="highest").to("local.out")
    result = run_pipeline(p, [("local.in", "a", 3), ("local.in", "a", 1), ("local.in", "a", 5)])
    assert sent(result, "local.out") == [("a", 3), ("a", 3), ("a", 5)]
    assert result.stores["highest"] == {"a": 5}


def test_count_aggregate_and_reduce_emit_result_of_the_aggregate_and_the_record() -> None:
    p = Pipeline()
    words: Stream[str, Event] = p.source("local.in")
    words.count(store="n", result=lambda n, record: {"count": n, "seq": record["seq"]}
                ).to("local.counts")
    words.aggregate(lambda: 0, lambda total, record: total + record["seq"], store="sum",
                    result=lambda total, record: [total, record["seq"]]).to("local.sums")
    (words.map_values(lambda record: record["seq"])
          .reduce(max, store="max", result=lambda top, seq: top - seq).to("local.gaps"))
    result = run_pipeline(p, [("local.in", "a", {"seq": 1}), ("local.in", "b", {"seq": 5}),
                              ("local.in", "a", {"seq": 3})])
    assert sent(result, "local.counts") == [("a", {"count": 1, "seq": 1}),
                                            ("b", {"count": 1, "seq": 5}),
                                            ("a", {"count": 2, "seq": 3})]
    assert sent(result, "local.sums") == [("a", [1, 1]), ("b", [5, 5]), ("a", [4, 3])]
    assert sent(result, "local.gaps") == [("a", 0), ("b", 0), ("a", 0)]
    assert result.stores == {"n": {"a": 2, "b": 1}, "sum": {"a": 4, "b": 5},
                             "max": {"a": 3, "b": 5}}


def test_a_window_emits_each_closed_window_once_as_its_value() -> None:
    p = Pipeline()
    (p.source("local.in")
     .window(Tumbling(size_ms=10), {"n": count(), "total": sum_of("amount")}, store="w")
     .to("local.out"))
    result = run_pipeline(p, [("local.in", "a", {"amount": 2}, 0, 1),
                              ("local.in", "b", {"amount": 3}, 0, 4),
                              ("local.in", "a", {"amount": 5}, 0, 9),
                              ("local.in", "a", {"amount": 7}, 0, 25)])
    assert sent(result, "local.out") == [
        ("a", {"start": 0, "end": 10, "value": {"n": 2, "total": 7}, "final": True}),
        ("b", {"start": 0, "end": 10, "value": {"n": 1, "total": 3}, "final": True})]


def test_a_window_with_emit_update_also_emits_each_change() -> None:
    p = Pipeline()
    p.source("local.in").window(Tumbling(size_ms=10), count(), store="w",
                                emit="update").to("local.out")
    result = run_pipeline(p, [("local.in", "a", {}, 0, 1), ("local.in", "a", {}, 0, 2),
                              ("local.in", "a", {}, 0, 15)])
    assert sent(result, "local.out") == [
        ("a", {"start": 0, "end": 10, "value": 1, "final": False}),
        ("a", {"start": 0, "end": 10, "value": 2, "final": False}),
        ("a", {"start": 10, "end": 20, "value": 1, "final": False}),
        ("a", {"start": 0, "end": 10, "value": 2, "final": True})]


def test_session_windows_merge_with_the_reducers_merge() -> None:
    p = Pipeline()
    sessions = fold(0, lambda total, value: total + value["n"], merge=lambda a, b: a + b)
    p.source("local.in").window(Session(gap_ms=5), sessions, store="s").to("local.out")
    result = run_pipeline(p, [("local.in", "a", {"n": 1}, 0, 1), ("local.in", "a", {"n": 2}, 0, 4),
                              ("local.in", "a", {"n": 4}, 0, 30)])
    assert sent(result, "local.out") == [
        ("a", {"start": 1, "end": 5, "value": 3, "final": True})]


def test_a_join_pairs_the_records_of_one_key_within_the_interval_once() -> None:
    p = Pipeline()
    clicks = p.source("local.clicks")
    views = p.source("local.views")
    clicks.join(views, lambda click, view: f"{click}<-{view}", before_ms=10, after_ms=0,
                store="joined").to("local.out")
    result = run_pipeline(p, [("local.views", "a", "v1", 0, 100),
                              ("local.clicks", "a", "c1", 0, 105),
                              ("local.clicks", "b", "c2", 0, 105),
                              ("local.clicks", "a", "c3", 0, 120)])
    assert [(m.key, m.value, m.timestamp) for m in result.sent_to("local.out")] == [
        ("a", "c1<-v1", 105)]


def test_a_left_join_emits_a_record_that_joined_nothing_with_none_once_it_expired() -> None:
    p = Pipeline()
    clicks = p.source("local.clicks")
    views = p.source("local.views")
    clicks.left_join(views, lambda click, view: [click, view], before_ms=10, after_ms=0,
                     store="joined").to("local.out")
    result = run_pipeline(p, [("local.views", "a", "v1", 0, 100),
                              ("local.clicks", "a", "c1", 0, 105),
                              ("local.clicks", "a", "c2", 0, 200),
                              ("local.clicks", "z", "c3", 0, 300),
                              ("local.views", "z", "v2", 0, 300)])
    assert sent(result, "local.out") == [("a", ["c1", "v1"]), ("z", ["c3", "v2"]),
                                         ("a", ["c2", None])]


def test_join_table_uses_the_tables_value_when_the_record_is_processed() -> None:
    p = Pipeline()
    profiles = p.table("local.profiles", store="profiles")
    (p.source("local.views")
     .join_table(profiles, lambda view, profile: {**view, "name": profile["name"]})
     .to("local.out"))
    result = run_pipeline(p, [("local.profiles", "u1", {"name": "Ann"}),
                              ("local.profiles", "u2", {"name": "Bob"}),
                              ("local.profiles", "u2", None),
                              ("local.views", "u1", {"page": "home"}),
                              ("local.views", "u2", {"page": "faq"})])
    assert sent(result, "local.out") == [("u1", {"page": "home", "name": "Ann"})]
    assert result.stores["profiles"] == {"u1": {"name": "Ann"}}


def test_left_join_table_passes_none_for_a_key_the_table_lacks() -> None:
    p = Pipeline()
    profiles = p.table("local.profiles", store="profiles", broadcast=True)
    p.source("local.views").left_join_table(
        profiles, lambda view, profile: [view, profile]).to("local.out")
    result = run_pipeline(p, [("local.profiles", "u1", "Ann"), ("local.views", "u1", "home"),
                              ("local.views", "u9", "faq")])
    assert sent(result, "local.out") == [("u1", ["home", "Ann"]), ("u9", ["faq", None])]


class FirstOfEach(Step[str, Event, str, Event]):
    """Passes on the first record of each id (its store remembers them) and, on each window
    tick, how many it passed."""

    def init(self, context: TaskContext) -> None:
        self.seen = context.store("seen")

    def process(self, key: str, value: Event, emit: Emit[str, Event]) -> None:
        if self.seen.get(str(value["id"])) is None:
            self.seen.put(str(value["id"]), emit.timestamp)
            emit(key, value)

    def window(self, emit: Emit[str, Event]) -> None:
        emit("passed", {"count": len(list(self.seen.all()))})


def test_a_custom_step_keeps_state_in_its_store_and_emits_on_window_ticks() -> None:
    p = Pipeline()
    p.source("local.in").process(FirstOfEach, stores=["seen"]).to("local.out")
    result = run_pipeline(p, [("local.in", "a", {"id": 1}, 0, 10),
                              ("local.in", "b", {"id": 1}, 0, 11),
                              ("local.in", "c", {"id": 2}, 0, 12)], windows=1)
    assert sent(result, "local.out") == [("a", {"id": 1}), ("c", {"id": 2}),
                                         ("passed", {"count": 2})]
    assert result.stores["seen"] == {"1": 10, "2": 12}


class WatermarkedIds(Step[str, Event, str, Any]):
    """Emits each record's stream and offset (its envelope), and on window ticks the
    watermark of the join before it."""

    def process(self, key: str, value: Event, emit: Emit[str, Any]) -> None:
        assert emit.envelope is not None
        emit(key, [emit.envelope.ssp.stream, emit.envelope.offset])

    def window(self, emit: Emit[str, Any]) -> None:
        emit("watermark", emit.watermark)


def test_a_custom_step_sees_each_records_envelope_and_the_watermark_of_the_join_before_it(
        ) -> None:
    p = Pipeline()
    left: Stream[str, Event] = p.source("local.left")
    (left.join(p.source("local.right"), lambda a, b: a, before_ms=5, after_ms=5, store="j")
         .process(WatermarkedIds).to("local.out"))
    result = run_pipeline(p, [("local.right", "k", {"n": 1}, 0, 100),
                              ("local.left", "k", {"n": 2}, 0, 102),
                              ("local.left", "x", {"n": 3}, 0, 140),
                              ("local.right", "y", {"n": 4}, 0, 150)], windows=1)
    # the join's watermark: the least event time of its two streams' partitions
    assert sent(result, "local.out") == [("k", ["left", 0]), ("watermark", 140)]


def test_a_custom_step_following_no_window_or_join_sees_no_watermark() -> None:
    p = Pipeline()
    p.source("local.in").process(WatermarkedIds).to("local.out")
    result = run_pipeline(p, [("local.in", "a", {}), ("local.in", "b", {})], windows=1)
    assert sent(result, "local.out") == [("a", ["in", 0]), ("b", ["in", 1]),
                                         ("watermark", None)]


def stages() -> Pipeline:
    p = Pipeline()
    views: Stream[str, Event] = p.source("local.views")
    by_page = views.partition_by(lambda user, view: view["page"], name="by-page")
    by_page.aggregate(lambda: 0, lambda total, view: total + view["secs"],
                      store="seconds").to("local.seconds")
    by_page.window(Tumbling(size_ms=10), count(), store="w").to("local.windows")
    return p


def views() -> list[tuple[Any, ...]]:
    return [("local.views", f"u{n % 3}", {"page": f"p{n % 4}", "secs": n}, 0, n * 3)
            for n in range(12)]


def test_committed_results_do_not_depend_on_a_crash_in_either_stage() -> None:
    whole = run_pipeline(stages, views())
    for crash_after in (5, 15):  # in the first stage; in the second, after the first committed
        crashed = run_pipeline(stages, views(), crash_after=crash_after)
        assert crashed.crashed_after == crash_after
        assert crashed.outputs == whole.outputs
        assert crashed.stores == whole.stores


def test_run_pipeline_runs_a_pipeline_job_file_through_its_declared_serdes(
        tmp_path: Path) -> None:
    (tmp_path / "counting.py").write_text(
        "from framework.pipelines import Pipeline\n\n"
        "def build():\n"
        "    p = Pipeline()\n"
        "    p.source('local.numbers').partition_by(lambda k, n: n % 2, name='parity')"
        ".count(store='counts').to('local.counts')\n"
        "    return p\n")
    (tmp_path / "job.toml").write_text(
        '[job]\nname = "parity"\npipeline = "counting:build"\n\n'
        '[systems.local]\ntype = "local"\n\n'
        '[streams."local.numbers"]\npartitions = 2\nvalue_serde = "int64"\n\n'
        '[streams."local.parity-parity-repartition"]\nkey_serde = "int64"\n'
        'value_serde = "int64"\n\n'
        '[streams."local.counts"]\nkey_serde = "int64"\nvalue_serde = "int64"\n\n'
        '[stores.counts]\nkey_serde = "int64"\nvalue_serde = "int64"\n')
    result = run_pipeline(tmp_path / "job.toml", [("local.numbers", "a", 3),
                                                  ("local.numbers", "b", 4),
                                                  ("local.numbers", "c", 5)])
    assert sent(result, "local.counts") == [(1, 1), (0, 1), (1, 2)]
    assert result.stores["counts"] == {0: 1, 1: 2}


def test_watermark_records_reach_a_markers_window_without_passing_the_operators_before_it(
        ) -> None:
    p = Pipeline()
    (p.source("local.in")
     .map_values(lambda value: {"n": value["n"] * 2})  # a watermark record has no "n"
     .window(Tumbling(size_ms=10), sum_of("n"), store="w", event_time="markers")
     .to("local.out"))
    result = run_pipeline(p, [("local.in", "a", {"n": 1}, 0, 1), ("local.in", "a", {"n": 2}, 0, 5),
                              ("local.in", "marker-0", {"watermark": 10}, 0, 6)])
    assert sent(result, "local.out") == [
        ("a", {"start": 0, "end": 10, "value": 6, "final": True})]


class TickingContext:
    """A task's context where partition 1 of the input has been idle for a minute and the
    window ticks are the test's to call."""

    def __init__(self, config: Any, ssps: frozenset[Any]) -> None:
        from framework.config.serdes import get_serde
        from framework.stores import MemoryEngine, TaskStore

        self.task_name, self.ssps, self.config = "Partition 0", ssps, config
        self.stores = {name: TaskStore(name, MemoryEngine(), get_serde("string"),
                                       get_serde("json"), 1000, task=self.task_name)
                       for name in config.stores}
        self.ticks: list[Any] = []

    def store(self, name: str) -> Any:
        return self.stores[name]

    def track_watermark(self, source: Any) -> None:
        return None

    def on_window(self, callback: Any) -> None:
        self.ticks.append(callback)

    def input_idle_ms(self, ssp: Any) -> int | None:
        return 60_000 if ssp.partition == 1 else None


class Collected:
    def __init__(self) -> None:
        self.sent: list[tuple[str, Any, Any]] = []

    def send(self, stream: str, key: Any = None, value: Any = None, **_: Any) -> None:
        self.sent.append((stream, key, value))


def test_a_window_closed_on_a_tick_passes_its_result_on() -> None:
    """An idle partition stops holding the watermark back on a window tick, which closes
    the window: its result goes on to the operators after the window, as on a record."""
    from framework.api import Envelope
    from framework.pipelines.task import PipelineTask
    from framework.testing import _pipeline_job
    from groupers import SystemStreamPartition

    p = Pipeline()
    (p.source("local.in").window(Tumbling(size_ms=10), count(), store="w")
     .map_values(lambda result: result.value).to("local.out"))
    config, compiled = _pipeline_job(p)
    ssps = frozenset(SystemStreamPartition("local", "in", n) for n in (0, 1))
    context = TickingContext(config, ssps)
    task = PipelineTask.bound(compiled)()
    task.init(context)  # type: ignore[arg-type]
    collector = Collected()
    for offset, ts in enumerate((1, 5, 30)):
        task.process(Envelope(SystemStreamPartition("local", "in", 0), offset, "a", {}, ts),
                     collector, None)  # type: ignore[arg-type]
    assert collector.sent == []  # partition 1 delivered nothing: no watermark yet
    for tick in context.ticks:
        tick(collector)
    assert collector.sent == [("local.out", "a", 2)]
