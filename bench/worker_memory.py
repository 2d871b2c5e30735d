"""Peak RSS of one worker whose RocksDB store ends up holding 1M keys.

The per-key sum job of `bench.worker` on the local log, over ``--keys`` records with a
distinct key each (so the store gets one entry per record; the write buffer fills up to
its bound, ``job.write_buffer_max_keys``, and forces commits). The worker runs in a child
process started after the input is written, so its peak resident set size (the
kernel's ``ru_maxrss``) is the worker's alone: Python, the task, the write buffer and
pending outputs, RocksDB's memtables and block cache.

Run: ``.venv/bin/python -m bench.worker_memory`` (``--keys N``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.worker import _job, _prepare
from framework.config import load_config
from framework.systems import open_system
from framework.systems.base import ProducerRecord
from framework.worker.runner import Worker

KEYS = 1_000_000


async def _write_input(folder: Path, keys: int) -> None:
    config = _job(folder, "local", None)
    records = [ProducerRecord("events", f"key-{n:07d}".encode(), b'{"amount":1}')
               for n in range(keys)]
    meta = open_system(config.system(config.metadata_system))
    await meta.start()
    try:
        await _prepare(config, meta, records)
    finally:
        await meta.close()


async def _child(folder: Path, keys: int) -> None:
    worker = Worker(load_config(folder / "job.toml"), 0)
    started = time.perf_counter()
    running = asyncio.create_task(worker.run())
    while sum(i.processed for i in worker.instances) < keys:
        if running.done():
            await running
            raise RuntimeError("the worker stopped early")
        await asyncio.sleep(0.01)
    worker.stop.set()
    await running
    elapsed = time.perf_counter() - started
    print(json.dumps({"seconds": elapsed, "max_rss_kb": resource.getrusage(
        resource.RUSAGE_SELF).ru_maxrss}))


def run(keys: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="sampan-bench-memory-"))
    try:
        folder = work / "job"
        asyncio.run(_write_input(folder, keys))
        done = subprocess.run([sys.executable, "-m", "bench.worker_memory", "--child",
                               str(folder), "--keys", str(keys)], capture_output=True,
                              text=True, cwd=Path(__file__).resolve().parent.parent)
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-3000:])
        result = json.loads(done.stdout.strip().splitlines()[-1])
        config = load_config(folder / "job.toml")
        print(f"one worker, {keys:,} distinct keys into a logged RocksDB store (local log), "
              f"write buffer bound {config.write_buffer_max_keys:,} keys per store:")
        print(f"peak RSS of the worker process: {result['max_rss_kb'] / 1024:,.0f} MiB "
              f"({keys / result['seconds']:,.0f} records/s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=KEYS)
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        asyncio.run(_child(args.child, args.keys))
        return
    run(args.keys)


if __name__ == "__main__":
    main()
