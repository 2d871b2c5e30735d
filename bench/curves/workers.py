"""Throughput against worker processes (1, 2, 4, 8) on the local log and on Apache Kafka.

One job of 8 partitions (so 8 workers each get a task), the same input each time; the
rate runs from the first worker resumed to the last input record committed.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from bench.curves.job import Run, prepare, records, run_workers, write_job
from bench.curves.plot import Curve

COUNTS = (1, 2, 4, 8)
PARTITIONS = 8


async def point(folder: Path, system: str, bootstrap: str | None, workers: int, count: int,
                keys: int) -> Run:
    """``workers`` worker processes over the job's input."""
    name = f"w{workers}-{int(time.time() * 1000) % 10**8}"
    config = write_job(folder, name=name, system=system, bootstrap=bootstrap,
                       partitions=PARTITIONS, workers=workers)
    await prepare(config, PARTITIONS, records(config, count, keys))
    return await run_workers(config, count)


def measure(work: Path, systems: dict[str, str | None], counts: tuple[int, ...], count: int,
            keys: int) -> list[Curve]:
    """``systems``: label → Kafka bootstrap (None: the local log)."""
    rate = Curve(f"{PARTITIONS} partitions, {count:,} records, {keys:,} keys",
                 "worker processes", "records/s")
    memory = Curve("Σ peak RSS of the workers", "worker processes", "MiB")
    for label, bootstrap in systems.items():
        system = "local" if bootstrap is None else "kafka"
        for workers in counts:
            run = asyncio.run(point(work / f"{system}-{workers}", system, bootstrap,
                                    workers, count, keys))
            rss = sum(run.peak_rss_mib)
            print(f"  {label}, {workers} workers: {run.rate:10,.0f} records/s, Σ peak RSS "
                  f"{rss:6.0f} MiB, start-up {run.startup:5.1f} s", flush=True)
            rate.add(label, workers, run.rate)
            memory.add(label, workers, rss)
    return [rate, memory]
