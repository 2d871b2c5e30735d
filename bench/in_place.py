"""What an expansion costs the running tasks: taken in place against stop-and-restart.

    python -m bench.in_place [--rounds 3] [--rate 2000]

One host on the local log: `sampan run` of the coordinator tests' count job (2 workers, 2
tasks, RocksDB, each output stamped with the time its record was processed), a paced
producer writing ``--rate`` records/s throughout, and the input expanded 2 → 4 → 8 while it
runs. Rounds interleave ``coordinator.model_changes = "in-place"`` and ``"restart"``, each
on a fresh job. Per mode, medians over rounds of:

- the longest gap in each task's progress around the expansions (between two records it
  processed, from a second before the first expansion to the end) — the task's
  unavailability, plus the producer's spacing;
- the expansion's pause as `sampan status` reports it (detection → every worker running
  the new epoch) and, in place, how long taking the model held each worker's loop;
- worker processes started (2 at the start; a restart adds 2 per expansion).

Every run is checked exact (one output per input, per key in order) before it counts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from jobs.outputs import keys  # noqa: E402
from jobs.runs import CountJob  # noqa: E402

from framework.drill.verify import read_stream  # noqa: E402

MODES = ("in-place", "restart")


async def _produce(job: CountJob, rate: int, stop: asyncio.Event) -> None:
    """``rate`` records/s in rounds of 40 keys until ``stop``."""
    every = 40 / rate
    next_at = time.monotonic()
    while not stop.is_set():
        await job.produce("words", keys(40), 1)
        next_at += every
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))


async def _progress_gaps(job: CountJob, since: float) -> dict[int, float]:
    """Task (input partition % 2) → the longest gap between two of its processed records
    stamped after ``since``."""
    stamps: dict[int, list[float]] = defaultdict(list)
    rows = await job.call(lambda s: read_stream(s, "counts"))
    for partition in rows.values():
        for _key, value in partition:
            data = json.loads(value)
            if data["t"] >= since:
                stamps[data["partition"] % 2].append(data["t"])
    return {task: max(b - a for a, b in zip(sorted(ts), sorted(ts)[1:], strict=False))
            for task, ts in sorted(stamps.items())}


async def _round(folder: Path, mode: str, rate: int) -> dict[str, float]:
    job = CountJob(folder, f"inplace-{mode}", {"words": 2}, task="TimedCountTask",
              monitor_ms=300, model_changes=mode)
    await job.create("words", 2)
    job.start()
    try:
        await job.wait_epoch(1)
        stop = asyncio.Event()
        producer = asyncio.create_task(_produce(job, rate, stop))
        await asyncio.sleep(2)
        since = time.time() - 1
        for epoch, count in ((2, 4), (3, 8)):
            await job.expand("words", count)
            await job.wait_epoch(epoch)
            await asyncio.sleep(2)
        stop.set()
        await producer
        await job.wait_outputs(timeout=120)
        state = await job.state()
        assert await job.stop() == 0
        await job.assert_exact()
    finally:
        job.kill()
    gaps = await _progress_gaps(job, since)
    pauses = [e.pause_ms or 0 for e in state.status.expansions]
    held = [r.in_place_ms or 0 for r in state.workers.values()]
    starts = job.coordinator_log().count("started worker")
    return {"gap task 0 ms": gaps[0] * 1000, "gap task 1 ms": gaps[1] * 1000,
            "pause 2→4 ms": pauses[0], "pause 4→8 ms": pauses[1],
            "loop held ms": max(held), "worker starts": starts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=int, default=2000)
    args = parser.parse_args()
    figures: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory(prefix="sampan-bench-inplace-") as tmp:
        for number in range(args.rounds):
            for mode in MODES:
                result = asyncio.run(_round(Path(tmp) / f"{mode}-{number}", mode, args.rate))
                figures[mode].append(result)
                print(f"round {number + 1} {mode}: " + ", ".join(
                    f"{k} {v:,.0f}" for k, v in result.items()), flush=True)
    print(f"\nmedians over {args.rounds} rounds, {args.rate:,} records/s, 2 → 4 → 8:")
    for mode in MODES:
        rows = figures[mode]
        print(f"  {mode:>8}: " + ", ".join(
            f"{k} {statistics.median(r[k] for r in rows):,.0f}" for k in rows[0]))


if __name__ == "__main__":
    main()
