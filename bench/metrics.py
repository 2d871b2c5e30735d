"""Metrics cost: the worker benchmark's sum job with ``[metrics]`` on vs off.

One in-process `Worker` (4 partitions, 4 tasks, one logged RocksDB store) on the local log
processes the same JSON records with ``[metrics] enabled = true`` (its ``/metrics`` scraped
every second meanwhile, as Prometheus would) and with ``enabled = false``, alternating
on/off runs; it prints the median throughput of each and the difference (target: at most
3% slower with metrics on).

Run: ``.venv/bin/python -m bench.metrics`` (``--records N --runs R``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.worker import KEYS, _job, _prepare, _records
from framework.config import JobConfig
from framework.systems import open_system
from framework.systems.base import ProducerRecord
from framework.worker.runner import Worker

RECORDS = 300_000
RUNS = 3


def _scrape_every_second(worker: Worker, done: threading.Event) -> None:
    """What Prometheus does to the worker meanwhile (a no-op with metrics off)."""
    while not done.wait(1.0):
        if worker.metrics.port:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{worker.metrics.port}/metrics"
                                            ) as response:
                    response.read()
            except OSError:
                return  # the worker stopped


async def _measure(config: JobConfig, records: list[ProducerRecord]) -> float:
    """Records/s from the worker's start until every record is processed and committed."""
    meta = open_system(config.system(config.metadata_system))
    await meta.start()
    done = threading.Event()
    try:
        model = await _prepare(config, meta, records)
        worker = Worker(config, 0, model=model)
        scraper = threading.Thread(target=_scrape_every_second, args=(worker, done))
        scraper.start()
        started = time.perf_counter()
        running = asyncio.create_task(worker.run())
        while sum(i.processed for i in worker.instances) < len(records):
            if running.done():
                await running
                raise RuntimeError("the worker stopped early")
            await asyncio.sleep(0.005)
        worker.stop.set()
        await running
        elapsed = time.perf_counter() - started
    finally:
        done.set()
        await meta.close()
    scraper.join()
    return len(records) / elapsed


def hook_cost(records: int) -> tuple[float, float]:
    """Seconds per call of the per-batch hook and of one scrape of a worker's figures (4
    tasks), measured in isolation: machine load does not blur them as it blurs throughput."""
    with tempfile.TemporaryDirectory(prefix="sampan-bench-metrics-") as folder:
        config = _job(Path(folder) / "hooks", "local", None)
    metrics = Worker(config, 0).metrics

    class Task:
        def __init__(self, name: str) -> None:
            self.name, self.processed, self.skipped = name, records, 0
            self.positions: dict[object, int] = {}
            self.ssps: frozenset[object] = frozenset()

    tasks = [Task(f"Partition {p}") for p in range(4)]
    metrics._worker = type("W", (), {"instances": tasks, "model": None,
                                     "restore_modes": {}})()
    calls = 200_000
    started = time.perf_counter()
    for n in range(calls):
        metrics.batch_done((tasks[n % 4],), 1250, 0.01)
    per_batch = (time.perf_counter() - started) / calls
    started = time.perf_counter()
    for _ in range(200):
        list(metrics.collect())
    return per_batch, (time.perf_counter() - started) / 200


def run(records: int, runs: int) -> tuple[float, float]:
    """Median records/s with metrics on and off."""
    rows = _records(records, KEYS)
    figures: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="sampan-bench-metrics-") as folder:
        for index in range(runs):
            for enabled in (True, False) if index % 2 == 0 else (False, True):
                config = _job(Path(folder) / f"run-{index}-{enabled}", "local", None)
                config = config.with_overrides({"metrics.enabled": enabled})
                figures[enabled].append(asyncio.run(_measure(config, rows)))
                print(f"  run {index + 1}, metrics {'on ' if enabled else 'off'}: "
                      f"{figures[enabled][-1]:,.0f} records/s", flush=True)
    return statistics.median(figures[True]), statistics.median(figures[False])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=RECORDS)
    parser.add_argument("--runs", type=int, default=RUNS)
    args = parser.parse_args()
    per_batch, per_scrape = hook_cost(args.records)
    on, off = run(args.records, args.runs)
    batches = args.records / 1250  # fetch_max_records 5000 over 4 partitions
    print(f"hooks: {per_batch * 1e6:.2f} µs per batch (of ~1250 records), "
          f"{per_scrape * 1e3:.2f} ms per scrape; at {off:,.0f} records/s that is "
          f"{batches * per_batch / (args.records / off):.3%} of the run for the batches "
          f"and {per_scrape:.3%} for one scrape a second")
    print(f"sum job, {args.records:,} records, median of {args.runs} runs each: metrics on "
          f"{on:,.0f} records/s, off {off:,.0f} records/s, cost {(off - on) / off:+.1%}")


if __name__ == "__main__":
    main()
