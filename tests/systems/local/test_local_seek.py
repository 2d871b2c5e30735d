"""Finding records of the real local log by time (a job's time start position): the first
record stamped at or after it, per partition, whatever order the producers' stamps have."""

from __future__ import annotations

from pathlib import Path

from framework.systems.base import ProducerRecord
from framework.systems.local.retention import RetentionPolicy
from framework.systems.local.system import LocalSystem


async def produce(system: LocalSystem, partition: int, stamps: list[int]) -> None:
    """One batch into ``partition``, a record per stamp (value: its stamp)."""
    await system.produce([ProducerRecord("events", b"k", str(t).encode(), partition=partition,
                                         timestamp=t) for t in stamps])


async def test_offsets_for_time_give_the_first_record_stamped_at_or_after_it(
        tmp_path: Path) -> None:
    system = LocalSystem("local", tmp_path)
    await system.create_stream("events", 3)
    await produce(system, 0, [10, 20, 30])        # offsets 0-2: one stamp each
    await produce(system, 0, [50, 40, 60])        # 3-5: not in order inside a batch
    await produce(system, 0, [25])                # 6: older than what came before
    await produce(system, 1, [70] * 1500)         # 0-1499: two batches sharing a stamp
    # partition 2 stays empty
    found = {t: await system.offsets_for_time("events", t) for t in (0, 20, 21, 45, 60, 61)}
    assert found == {
        0: {0: 0, 1: 0, 2: 0},
        20: {0: 1, 1: 0, 2: 0},
        21: {0: 2, 1: 0, 2: 0},
        45: {0: 3, 1: 0, 2: 0},    # 50 is the first at or after 45 (40 after it is read too)
        60: {0: 5, 1: 0, 2: 0},
        61: {0: 7, 1: 0, 2: 0},    # none in partition 0: its end
    }
    assert await system.offsets_for_time("events", 71) == {0: 7, 1: 1500, 2: 0}
    await system.close()


async def test_offsets_for_time_skip_what_retention_deleted(tmp_path: Path) -> None:
    system = LocalSystem("local", tmp_path)
    await system.create_stream("events", 1)
    for stamp in (10, 20, 30):
        await produce(system, 0, [stamp] * 100)
    await system.apply_retention("events", RetentionPolicy(retention_ms=15), now_ms=30)
    assert (await system.offsets("events"))[0].oldest == 100
    assert await system.offsets_for_time("events", 0) == {0: 100}
    assert await system.offsets_for_time("events", 25) == {0: 200}
    await system.close()
