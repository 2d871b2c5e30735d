"""Throughput and worker memory against tasks per worker: one worker, 4 … 256 partitions.

The same input (``records`` over ``keys`` keys) spread over more partitions: the work is
constant, so whatever grows with the partition count is a per-task cost.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from bench.curves.job import Run, prepare, records, run_workers, write_job
from bench.curves.plot import Curve

QUICK = (4, 16, 64, 256)


async def point(folder: Path, partitions: int, count: int, keys: int) -> Run:
    """One worker over ``partitions`` partitions."""
    config = write_job(folder, name=f"tasks{partitions}", partitions=partitions)
    await prepare(config, partitions, records(config, count, keys))
    return await run_workers(config, count)


def measure(work: Path, sizes: tuple[int, ...], count: int, keys: int) -> list[Curve]:
    rate = Curve(f"one worker, {count:,} records, {keys:,} keys, local log",
                 "partitions = tasks per worker", "records/s", log_x=True)
    memory = Curve("peak RSS of the worker", "partitions = tasks per worker", "MiB",
                   log_x=True)
    startup = Curve("worker spawned → resumed", "partitions = tasks per worker", "seconds",
                    log_x=True)
    for partitions in sizes:
        run = asyncio.run(point(work / f"p{partitions}", partitions, count, keys))
        print(f"  {partitions:4} tasks: {run.rate:10,.0f} records/s, peak RSS "
              f"{run.peak_rss_mib[0]:6.0f} MiB, start-up {run.startup:6.1f} s", flush=True)
        rate.add("records/s", partitions, run.rate)
        memory.add("peak RSS", partitions, run.peak_rss_mib[0])
        startup.add("start-up", partitions, run.startup)
    return [rate, memory, startup]
