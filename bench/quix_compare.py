"""sampan against Quix Streams on the per-key sum job, one process each, same broker and data.

Per round: a tansu broker on a free 127.0.0.1 port; ``--records`` JSON records
(``{"amount": n}``, ``--keys`` string keys, 4 partitions: `bench.worker`'s data) in topic
``events``; then one sampan `Worker` (logged RocksDB store, one output per record) and
one Quix Streams application (`bench.quix_app`: RocksDB state with its changelog topic,
one output per record) each read all of it. Each gets two figures: records/s from start
to the last record processed (sampan: and committed), startup included, and from its
first record on (startup excluded: Quix's consumer-group join takes ~25 s on tansu).

Quix Streams lives in its own virtualenv, never in sampan's:

    python3 -m venv /work/venv-quix && /work/venv-quix/bin/pip install quixstreams
    .venv/bin/python -m bench.quix_compare --quix-python /work/venv-quix/bin/python

(``--records N --rounds R``; the defaults are 300,000 records and 1 round).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.systems_baseline import tansu
from bench.worker import KEYS, _job, _prepare, _records
from framework.config import JobConfig
from framework.jobmodel import JobModel
from framework.systems import open_system
from framework.systems.base import ProducerRecord
from framework.worker.runner import Worker

APP = Path(__file__).resolve().parent / "quix_app.py"


async def _run(config: JobConfig, model: JobModel, count: int) -> tuple[float, float]:
    """(seconds from start until ``count`` records are processed and committed, seconds
    from the first processed record on)."""
    worker = Worker(config, 0, model=model)
    started = time.perf_counter()
    first = None
    running = asyncio.create_task(worker.run())
    while (done := sum(i.processed for i in worker.instances)) < count:
        if first is None and done:
            first = time.perf_counter()
        if running.done():
            await running
            raise RuntimeError("the worker stopped early")
        await asyncio.sleep(0.002)
    worker.stop.set()
    await running  # includes the final commit
    ended = time.perf_counter()
    return ended - started, ended - (first or started)


async def _sampan(folder: Path, bootstrap: str,
                  records: list[ProducerRecord]) -> tuple[float, float]:
    """(records/s with startup, records/s from the first record on) of one sampan worker
    over ``records`` (produced here first)."""
    config = _job(folder, "kafka", bootstrap)
    meta = open_system(config.system(config.metadata_system))
    await meta.start()
    try:
        model = await _prepare(config, meta, records)
        total, processing = await _run(config, model, len(records))
    finally:
        await meta.close()
    return len(records) / total, len(records) / processing


def _quix(python: str, bootstrap: str, count: int, round_: int) -> tuple[float, float]:
    """(records/s start to stop, records/s first to last record) of the Quix app."""
    done = subprocess.run(
        [python, str(APP), "--bootstrap", bootstrap, "--count", str(count),
         "--group", f"quix-bench-{round_}", "--output", f"quix-sums-{round_}"],
        capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"the Quix app failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return count / result["total_s"], count / result["processing_s"]


def run(python: str, records: int, keys: int, rounds: int) -> None:
    data = _records(records, keys)
    ours, ours_processing, theirs, theirs_processing = [], [], [], []
    for round_ in range(rounds):
        with tansu() as bootstrap:
            folder = Path(tempfile.mkdtemp(prefix="sampan-quix-")) / "job"
            total, processing = asyncio.run(_sampan(folder, bootstrap, data))
            ours.append(total)
            ours_processing.append(processing)
            total, processing = _quix(python, bootstrap, records, round_)
            theirs.append(total)
            theirs_processing.append(processing)
        print(f"round {round_ + 1}: sampan {ours[-1]:,.0f} records/s "
              f"({ours_processing[-1]:,.0f} without startup), Quix Streams "
              f"{theirs[-1]:,.0f} records/s ({theirs_processing[-1]:,.0f} without startup)")
    sampan, quix = statistics.median(ours), statistics.median(theirs)
    sampan_p, quix_p = statistics.median(ours_processing), statistics.median(theirs_processing)
    print(f"per-key sum on tansu, {records:,} records, {keys:,} keys, 1 process each "
          f"(median of {rounds}):")
    print(f"sampan worker:   {sampan:>10,.0f} records/s  ({sampan_p:,.0f} from its first record)")
    print(f"Quix Streams:    {quix:>10,.0f} records/s  ({quix_p:,.0f} from its first record)")
    print(f"sampan / Quix:   {sampan / quix:>10.1f}x start to end; {sampan_p / quix_p:.1f}x "
          f"from the first record on (target >= 5x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quix-python", default="/work/venv-quix/bin/python",
                        help="python of a virtualenv with quixstreams installed")
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--keys", type=int, default=KEYS)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    run(args.quix_python, args.records, args.keys, args.rounds)


if __name__ == "__main__":
    main()
