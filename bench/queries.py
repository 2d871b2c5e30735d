"""Interactive queries under load: queries per second and latency per endpoint while the
job processes at full speed, and the job's throughput with and without query load.

    python -m bench.queries [--records 100000] [--keys 1000] [--concurrency 8] [--rounds 2]

One host on the local log: `sampan run` of the coordinator tests' count job (2 workers, 2
tasks, RocksDB) with ``[queries] enabled`` and its store ``keyed_by`` the input. Each
round runs the job twice on fresh folders: ``--records`` records are produced up front,
then the job reads them at full speed — once alone, once while ``--concurrency`` queriers
(split over the workers' endpoints, each endpoint answering every key: half of them
forwarded) ask for random keys until the job has caught up. Printed per round: the
job's throughput both ways, and per endpoint the queries answered per second and their
p50 / p99 latency. The queriers run in this process, on the same machine as the job:
on a 2-core machine they take CPU from it, which the throughput with queries shows.
Every run is checked exact (one output per input, per key in order) before it counts.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from jobs.outputs import keys  # noqa: E402
from jobs.runs import CountJob  # noqa: E402

from framework.config import load_config  # noqa: E402
from framework.queries.client import Client  # noqa: E402
from framework.queries.errors import (  # noqa: E402
    EndpointUnreachableError,
    TaskUnavailableError,
)

QUERY_KEYS = '''\
def record_key(key):
    return key.split("/", 1)[1]
'''


def _queried_job(folder: Path, name: str) -> CountJob:
    job = CountJob(folder, name, {"words": 2}, monitor_ms=1000)
    (job.folder / "query_keys.py").write_text(QUERY_KEYS)
    job.path.write_text(job.path.read_text() + 'keyed_by = "local.words"\n'
                        'key_to_input = "query_keys:record_key"\n\n[queries]\nenabled = true\n')
    job.config = load_config(job.path)
    return job


class _Querier:
    """One endpoint's queriers: answers and latencies until stopped."""

    def __init__(self, url: str, names: list[str]) -> None:
        self.url = url
        self.names = names
        self.latencies: list[float] = []
        self.unavailable = 0

    async def run(self, stop: asyncio.Event, seed: int) -> None:
        rng = random.Random(seed)
        async with Client([self.url], retry_for=0) as client:
            while not stop.is_set():
                began = time.perf_counter()
                try:
                    await client.get("counts", rng.choice(self.names))
                except (TaskUnavailableError, EndpointUnreachableError):
                    self.unavailable += 1
                    await asyncio.sleep(0.01)
                    continue
                self.latencies.append(time.perf_counter() - began)


async def _run(folder: Path, records: int, key_count: int, concurrency: int
               ) -> tuple[float, dict[str, _Querier], float]:
    """One run: the job's throughput (records/s, from the first record produced to the
    last output) and, with ``concurrency`` > 0, the queriers that ran meanwhile."""
    job = _queried_job(folder, f"queries-{concurrency}")
    await job.create("words", 2)
    names = keys(key_count)
    job.start()
    try:
        await job.wait_epoch(1)

        async def listening() -> bool:
            return len([e for e in (await job.state()).queries.values() if e.url]) == 2
        await job.wait(listening, "both query endpoints", timeout=60)
        state = await job.state()
        urls = [str(e.url) for _, e in sorted(state.queries.items()) if e.url]
        queriers = {url: _Querier(url, [f"words/{n}" for n in names]) for url in urls}
        stop = asyncio.Event()
        tasks = [asyncio.create_task(queriers[urls[i % len(urls)]].run(stop, i))
                 for i in range(concurrency)]
        began = time.monotonic()
        rounds = max(1, records // key_count)
        for start in range(0, rounds, 20):
            await job.produce("words", names, min(20, rounds - start))
        await job.wait_outputs(timeout=1800)
        seconds = time.monotonic() - began
        stop.set()
        await asyncio.gather(*tasks)
        assert await job.stop() == 0
        await job.assert_exact()
        return job.truth.total / seconds, (queriers if concurrency else {}), seconds
    finally:
        job.kill()


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000 if ordered else 0.0


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    print(f"queries bench: {args.records:,} records over {args.keys:,} keys, 2 workers, "
          f"local log; {args.concurrency} concurrent queriers")
    alone, loaded = [], []
    for round_ in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory(prefix="sampan-bench-queries-") as folder:
            rate, _, _ = await _run(Path(folder) / "alone", args.records, args.keys, 0)
            with_rate, queriers, seconds = await _run(Path(folder) / "loaded", args.records,
                                                      args.keys, args.concurrency)
        alone.append(rate)
        loaded.append(with_rate)
        print(f"round {round_}: job alone {rate:,.0f} records/s; with queries "
              f"{with_rate:,.0f} records/s ({with_rate / rate:.0%})")
        for url, querier in sorted(queriers.items()):
            print(f"  endpoint {url}: {len(querier.latencies) / seconds:,.0f} queries/s "
                  f"answered, p50 {_ms(querier.latencies, .5):.1f} ms, p99 "
                  f"{_ms(querier.latencies, .99):.1f} ms, {querier.unavailable} "
                  f"unavailable")
    print(f"median: job alone {statistics.median(alone):,.0f} records/s, with queries "
          f"{statistics.median(loaded):,.0f} records/s")


if __name__ == "__main__":
    asyncio.run(main())
