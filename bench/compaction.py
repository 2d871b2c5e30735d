"""Compaction benchmark: a changelog after 1M updates over 10k keys, before and after.

Writes 1,000,000 updates of 10,000 keys into one partition of a compacted stream on the
local log (as a job's commits would), then measures what a full restore reads and how
long it takes into a fresh RocksDB store, before and after `LocalSystem.compact` (what
the coordinator runs every ``coordinator.compaction_interval_ms``), and how long the
compaction itself took.

Run: ``.venv/bin/python -m bench.compaction``.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from framework.stores import RocksDBEngine, changelog_reader, restore_store
from framework.systems.base import ProducerRecord
from framework.systems.local.system import LocalSystem
from groupers import SystemStreamPartition

UPDATES = 1_000_000
KEYS = 10_000
STREAM = "bench-counts-changelog"


async def full_restore(system: LocalSystem, folder: Path, name: str) -> tuple[int, int, float]:
    """(records kept, records restored, seconds) of a full restore into a new store."""
    span = (await system.offsets(STREAM))[0]
    engine = RocksDBEngine(folder / name)
    started = time.perf_counter()
    result = await restore_store(
        engine, changelog=(STREAM, 0), oldest=span.oldest, end=span.end, progress=None,
        fetch=changelog_reader(system, SystemStreamPartition("local", STREAM, 0), span.end))
    elapsed = time.perf_counter() - started
    count = engine.count()
    engine.close()
    assert count == KEYS, count
    kept = len((await system.read_columns(STREAM, 0, span.oldest, span.end, UPDATES))[0])
    return kept, result.records, elapsed


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="sampan-bench-") as tmp:
        folder = Path(tmp)
        system = LocalSystem("local", folder / "log")
        await system.create_stream(STREAM, 1, compacted=True)
        for start in range(0, UPDATES, 50_000):
            await system.produce([
                ProducerRecord(STREAM, f"key-{n % KEYS:05d}".encode(), str(n).encode(), 0)
                for n in range(start, start + 50_000)])
        before = await full_restore(system, folder, "before")
        started = time.perf_counter()
        dropped = await system.compact(STREAM)
        compaction = time.perf_counter() - started
        after = await full_restore(system, folder, "after")
        await system.close()
    print(f"changelog after {UPDATES:,} updates over {KEYS:,} keys (local log, 1 partition)")
    print(f"  before compaction: {before[0]:>9,} records kept, full restore {before[2]:6.2f} s "
          f"({before[1]:,} records read)")
    print(f"  compaction:        {dropped:>9,} records dropped in {compaction:.2f} s")
    print(f"  after compaction:  {after[0]:>9,} records kept, full restore {after[2]:6.2f} s "
          f"({after[1]:,} records read)")


if __name__ == "__main__":
    asyncio.run(main())
