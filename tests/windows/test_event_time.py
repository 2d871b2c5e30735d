"""`EventTime`: which partitions and marker keys hold the watermark back, per source."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from framework.api import Envelope
from framework.config.serdes import get_serde
from framework.stores import MemoryEngine, TaskStore
from framework.windows import EventTime, Tumbling, WindowError, Windows, count
from groupers import SystemStreamPartition as SSP


@dataclass
class Context:
    """Just what `EventTime` needs of a `TaskContext`."""

    ssps: frozenset[SSP]
    task_name: str = "Partition 0"
    stores: dict[str, TaskStore] = field(default_factory=dict)
    tracked: list[Any] = field(default_factory=list)
    config_idle: int | None = None

    @property
    def config(self) -> Any:
        extra = {} if self.config_idle is None else {"input_idle_timeout_ms": self.config_idle}
        return type("Config", (), {"inputs": ("local.views",), **extra})()

    def store(self, name: str) -> TaskStore:
        if name not in self.stores:
            self.stores[name] = TaskStore(name, MemoryEngine(), get_serde("string"),
                                          get_serde("json"))
        return self.stores[name]

    def track_watermark(self, source: Any) -> None:
        self.tracked.append(source)


def context(*partitions: int) -> Context:
    return Context(frozenset(SSP("local", "views", p) for p in partitions))


def record(partition: int, ts: int) -> Envelope:
    return Envelope(SSP("local", "views", partition), 0, "k", {"ts": ts}, ts)


def marker(partition: int, key: str, watermark: int) -> Envelope:
    return Envelope(SSP("local", "views", partition), 0, key, {"watermark": watermark}, 0)


def test_records_watermark_is_the_least_partition_time_once_all_delivered() -> None:
    ctx = context(0, 2)
    clock = EventTime(ctx, "w")
    assert ctx.tracked == [clock]
    assert [clock.observe(e) for e in (record(0, 50), record(0, 70), record(2, 60),
                                       record(2, 90), record(0, 65), record(0, 95))] == [
        None, None, 60, 70, None, 90]
    assert clock.describe()["partitions"] == {"local.views.0": 95, "local.views.2": 90}


def test_records_watermark_survives_a_restart_once_saved() -> None:
    ctx = context(0)
    clock = EventTime(ctx, "w")
    clock.observe(record(0, 40))
    assert EventTime(ctx, "w").watermark is None  # kept in memory until a decision saves it
    clock.save()
    assert ctx.stores["w"].get("t~watermark") == 40
    again = EventTime(ctx, "w")
    assert again.watermark == 40
    assert again.observe(record(0, 30)) is None and again.watermark == 40


def test_records_a_partition_added_by_an_expansion_holds_until_it_delivers() -> None:
    ctx = context(0)
    first = EventTime(ctx, "w")
    first.observe(record(0, 40))
    first.save()
    grown = Context(frozenset({*ctx.ssps, SSP("local", "views", 2)}), stores=ctx.stores)
    clock = EventTime(grown, "w")
    assert clock.observe(record(0, 100)) is None and clock.watermark == 40
    assert clock.observe(record(2, 80)) == 80


def test_markers_a_key_moved_to_an_unread_partition_holds_the_watermark() -> None:
    clock = EventTime(context(0, 2), "w", source="markers")
    assert clock.observe(marker(0, "m0", 10)) is None  # one key for two partitions
    assert clock.observe(marker(0, "m2", 10)) == 10
    assert clock.observe(record(0, 500)) is None      # records do not move it
    assert clock.observe(marker(0, "m0", 60)) is None  # m2 now lives in partition 2
    assert clock.observe(marker(2, "m2", 60)) == 60


def test_markers_an_added_partition_that_stays_empty_holds_nothing_back() -> None:
    clock = EventTime(context(0, 2, 4, 6), "w", source="markers")
    for key in ("m0", "m2", "m4"):                   # keys for 8 partitions, all in 0
        clock.observe(marker(0, key, 100))
    assert clock.watermark is None                   # a key of the task not seen yet
    assert clock.observe(marker(0, "m6", 100)) == 100


# -- idle partitions ("records") ----------------------------------------------------------


@dataclass
class IdleContext(Context):
    """A context whose worker reports, per partition, how long it has been read to its
    end (``idle``: partition → ms), with the window ticks it was given."""

    idle: dict[int, int] = field(default_factory=dict)
    ticks: list[Any] = field(default_factory=list)

    def input_idle_ms(self, ssp: SSP) -> int | None:
        return self.idle.get(ssp.partition)

    def on_window(self, callback: Any) -> None:
        self.ticks.append(callback)

    def tick(self) -> None:
        for callback in self.ticks:
            callback(None)


def idle_context(*partitions: int) -> IdleContext:
    return IdleContext(frozenset(SSP("local", "views", p) for p in partitions))


def test_an_idle_partition_stops_holding_the_watermark_until_a_fetch_brings_records() -> None:
    ctx = idle_context(0, 1, 2)
    clock = EventTime(ctx, "w", idle_timeout_ms=1_000)
    for event in (record(0, 50), record(1, 20), record(0, 70)):
        clock.observe(event)
    assert clock.watermark is None  # partition 2 has delivered nothing
    ctx.idle = {1: 5_000, 2: 999}
    ctx.tick()
    assert clock.watermark is None and clock.idle == {SSP("local", "views", 1)}
    ctx.idle = {1: 5_000, 2: 1_000}
    ctx.tick()  # 1 and 2 idle: partition 0 alone
    assert clock.watermark == 70
    assert clock.describe()["idle"] == ["local.views.1", "local.views.2"]
    ctx.idle = {2: 1_200}  # a fetch brought records from 1: it holds again at once
    assert clock.observe(record(0, 90)) is None and clock.watermark == 70
    assert clock.observe(record(1, 80)) == 80


def test_when_every_partition_is_idle_the_least_time_delivered_holds() -> None:
    ctx = idle_context(0, 1, 2)
    clock = EventTime(ctx, "w", idle_timeout_ms=10)
    clock.observe(record(0, 50))
    clock.observe(record(1, 30))
    ctx.idle = {0: 10, 1: 10, 2: 10}
    ctx.tick()
    assert clock.watermark == 30  # 2 delivered nothing: the others' least time


def test_no_idleness_with_a_zero_timeout_or_markers() -> None:
    ctx = idle_context(0, 1)
    never = EventTime(ctx, "w", idle_timeout_ms=0)
    markers = EventTime(ctx, "m", source="markers", idle_timeout_ms=10)
    never.observe(record(0, 50))
    ctx.idle = {1: 10**9}
    ctx.tick()
    assert (never.watermark, never.idle, ctx.ticks) == (None, frozenset(), [])
    assert markers.watermark is None
    with pytest.raises(WindowError, match="idle_timeout_ms must be a number of milliseconds"):
        EventTime(ctx, "w", idle_timeout_ms=-1)


def test_the_job_file_sets_the_idle_timeout() -> None:
    ctx = idle_context(0)
    assert EventTime(ctx, "w").idle_timeout_ms == 0  # this stand-in config has none
    ctx.config_idle = 250
    assert EventTime(ctx, "x").idle_timeout_ms == 250


def test_quiet_times_are_the_partition_times_and_none_while_a_partition_is_idle() -> None:
    # A record at or before its partition's quiet time needs no `record` call; while a
    # partition is idle every record needs one (it may end the idle spell).
    ctx = idle_context(0, 1)
    clock = EventTime(ctx, "w", idle_timeout_ms=1_000)
    clock.observe(record(0, 50))
    clock.observe(record(1, 40))
    assert clock.quiet == {SSP("local", "views", 0): 50, SSP("local", "views", 1): 40}
    ctx.idle = {1: 5_000}
    ctx.tick()
    assert clock.quiet == {}
    ctx.idle = {}
    clock.record(SSP("local", "views", 1), 30)  # a fetch brought records from 1
    assert clock.idle == frozenset()
    assert clock.quiet == {SSP("local", "views", 0): 50, SSP("local", "views", 1): 40}
    markers = EventTime(context(0), "m", source="markers")
    markers.observe(marker(0, "p0", 70))
    assert markers.quiet == {}


def test_windows_an_older_record_ending_an_idle_spell_moves_the_watermark_at_once() -> None:
    ctx = IdleContext(frozenset(SSP("local", "views", p) for p in (0, 1)), config_idle=1_000)
    windows = Windows(ctx, "w", Tumbling(size_ms=100, grace_ms=100), count())  # type: ignore[arg-type]
    windows.process(record(0, 50), None)  # type: ignore[arg-type]
    windows.process(record(1, 40), None)  # type: ignore[arg-type]
    ctx.idle = {0: 5_000, 1: 5_000}
    ctx.tick()
    assert windows.watermark == 40  # every partition idle: the least time delivered
    ctx.idle = {1: 5_000}  # a fetch brought records from 0
    windows.process(record(0, 45), None)  # type: ignore[arg-type]
    assert windows.watermark == 50  # partition 0 alone holds it
