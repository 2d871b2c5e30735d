"""`framework.windows.watermarks`: marker keys cover every partition; the watermark is the
least mark."""

from __future__ import annotations

import doctest

import framework.windows.watermarks as W
from framework.api import Envelope
from framework.config.serdes import get_serde
from framework.partitioner import partition_for_key
from framework.stores import MemoryEngine, TaskStore
from groupers import SystemStreamPartition


def test_doctests() -> None:
    assert doctest.testmod(W).failed == 0


def test_marker_keys_for_8_partitions_also_cover_4_and_2() -> None:
    keys = W.marker_keys("clicks", 8)
    for count in (8, 4, 2):
        assert {partition_for_key(k.encode(), count) for k in keys} == set(range(count))


def test_the_watermark_waits_for_every_partition_then_is_the_least_mark() -> None:
    store = TaskStore("watermarks", MemoryEngine(), get_serde("string"), get_serde("json"))
    ssps = [SystemStreamPartition("local", "s", p) for p in (0, 1)]
    marks = W.Watermarks(store, ssps)

    def mark(partition: int, key: str, t: int) -> int | None:
        return marks.observe(Envelope(ssps[partition], 0, key, {"watermark": t}, t, {}))

    assert mark(0, "m0", 100) is None  # partition 1 has not spoken yet
    assert marks.current() is None
    assert mark(1, "m1", 50) == 50
    assert mark(1, "m1", 80) == 80
    assert mark(0, "m0", 120) is None  # the least mark (m1 = 80) did not move
    assert W.Watermarks(store, ssps).current() == 80  # state survives a restart
    assert W.is_watermark({"watermark": 1}) and not W.is_watermark({"ts": 1})
