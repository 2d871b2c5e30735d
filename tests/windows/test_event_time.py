"""`EventTime`: which partitions and marker keys hold the watermark back, per source."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from framework.api import Envelope
from framework.serdes import get_serde
from framework.stores import MemoryEngine, TaskStore
from framework.windows import EventTime
from groupers import SystemStreamPartition as SSP


@dataclass
class Context:
    """Just what `EventTime` needs of a `TaskContext`."""

    ssps: frozenset[SSP]
    task_name: str = "Partition 0"
    stores: dict[str, TaskStore] = field(default_factory=dict)
    tracked: list[Any] = field(default_factory=list)

    @property
    def config(self) -> Any:
        return type("Config", (), {"inputs": ("local.views",)})()

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
