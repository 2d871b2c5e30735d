"""Windowing benchmark: windowed counts (hopping 5 min / 1 min) against the plain per-key
sum, in one run on one machine.

Both jobs run one in-process `Worker` on the local log over the same records: 4 input
partitions, 4 tasks, one logged RocksDB store, 10k keys, JSON values. The records carry an
event time (the record timestamp) advancing 3.6 ms per record — 1M records span an hour
of event time, so every key sees about 100 records in some 64 windows — with a random
delay of up to 5 s (the windows' grace is 10 s, so nothing is late). Timed from the
worker's start until every record is processed and committed.

- sum: ``totals[key] += amount``, one output per record (bench/worker.py's job);
- windowed count: `framework.windows.Windows` (records-mode event time, `count()`), one
  output per closed window.

Run: ``.venv/bin/python -m bench.windows`` (``--records N --keys K`` for a smaller run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from framework.config import JobConfig, load_config
from framework.coordinator.builder import build_job_model
from framework.metadata import publish_model
from framework.systems import open_system
from framework.systems.base import ProducerRecord
from framework.worker.runner import Worker

RECORDS = 1_000_000
KEYS = 10_000
PARTITIONS = 4
STEP_MS = 3.6
MAX_DELAY_MS = 5_000

SUM_TASK = '''\
from framework import StreamTask


class SumTask(StreamTask):
    def init(self, context):
        self.totals = context.store("state")

    def process(self, envelope, collector, coordinator):
        total = (self.totals.get(envelope.key) or 0) + envelope.value["amount"]
        self.totals.put(envelope.key, total)
        collector.send(f"{envelope.ssp.system}.out", key=envelope.key, value=total)
'''

WINDOW_TASK = '''\
from framework import StreamTask
from framework.windows import Hopping, Windows, count

WINDOW = Hopping(size_ms=300_000, advance_ms=60_000, grace_ms=10_000)


class WindowedCountTask(StreamTask):
    def init(self, context):
        self.windows = Windows(context, "state", WINDOW, count())

    def process(self, envelope, collector, coordinator):
        for window in self.windows.process(envelope, collector):
            collector.send(f"{envelope.ssp.system}.out", key=window.key,
                           value={"start": window.start, "count": window.value})
'''


def _job(folder: Path, module: str, task: str, text: str) -> JobConfig:
    folder.mkdir(parents=True)
    (folder / f"{module}.py").write_text(text)
    (folder / "job.toml").write_text(f"""\
[job]
name = "bench-{module}"
task = "{module}:{task}"
inputs = ["local.events"]
fetch_max_records = 5000

[systems.local]
type = "local"
path = "data"

[streams."local.events"]
[streams."local.out"]
[stores.state]
""")
    return load_config(folder / "job.toml")


def _records(count: int, keys: int) -> list[ProducerRecord]:
    """Records in production order; each at most MAX_DELAY_MS after its event time."""
    rng = random.Random(7)
    names = [f"key-{n:05d}".encode() for n in range(keys)]
    timed = []
    for n in range(count):
        ts = int(n * STEP_MS)
        value = json.dumps({"amount": rng.randint(1, 9)}).encode()
        timed.append((ts + rng.randrange(MAX_DELAY_MS), ts, rng.choice(names), value))
    timed.sort(key=lambda item: item[0])
    return [ProducerRecord("events", key, value, timestamp=ts) for _, ts, key, value in timed]


async def _rate(config: JobConfig, records: list[ProducerRecord]) -> tuple[float, int]:
    """(records/s, outputs) of one worker running ``config`` over ``records``."""
    system = open_system(config.system("local"))
    await system.start()
    try:
        await system.create_stream("events", PARTITIONS)
        await system.create_stream("out", PARTITIONS)
        model = build_job_model(config, {config.inputs[0]: PARTITIONS}, None)
        await system.create_stream(config.changelog_stream("state").partition(".")[2],
                                   model.changelog_partitions, compacted=True)
        await publish_model(system, config, model)
        for at in range(0, len(records), 10_000):
            await system.produce(records[at:at + 10_000])
        worker = Worker(config, 0, model=model)
        started = time.perf_counter()
        running = asyncio.create_task(worker.run())
        while sum(i.processed for i in worker.instances) < len(records):
            if running.done():
                await running
                raise RuntimeError("the worker stopped early")
            await asyncio.sleep(0.005)
        worker.stop.set()
        await running  # includes the final commit
        elapsed = time.perf_counter() - started
        outputs = sum(r.end for r in (await system.offsets("out")).values())
    finally:
        await system.close()
    return len(records) / elapsed, outputs


def run(records: int = RECORDS, keys: int = KEYS) -> tuple[float, float]:
    """Measure both jobs over the same records and print the figures."""
    data = _records(records, keys)
    print(f"{records:,} JSON records, {keys:,} keys, {PARTITIONS} partitions, 1 worker, "
          f"logged RocksDB store; event time spans {records * STEP_MS / 60_000:,.0f} min")
    work = Path(tempfile.mkdtemp(prefix="sampan-bench-windows-"))
    try:
        sums, sum_out = asyncio.run(_rate(_job(work / "sum", "sum_task", "SumTask", SUM_TASK),
                                          data))
        windowed, window_out = asyncio.run(_rate(
            _job(work / "windows", "window_task", "WindowedCountTask", WINDOW_TASK), data))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"per-key sum:                          {sums:>10,.0f} records/s "
          f"({sum_out:,} outputs)")
    print(f"windowed count, hopping 5 min / 1 min: {windowed:>10,.0f} records/s "
          f"({window_out:,} closed windows; {windowed / sums:.0%} of the sum)")
    return sums, windowed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=RECORDS)
    parser.add_argument("--keys", type=int, default=KEYS)
    args = parser.parse_args()
    run(args.records, args.keys)


if __name__ == "__main__":
    main()
