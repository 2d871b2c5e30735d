"""Spark pipeline benchmark: reading the local log into Spark, and re-keying 1M store keys.

1. Read: 1M word-count input records (8 partitions, 10,000 distinct words) through the
   ``sampan`` DataSource — ``count()`` and a ``groupBy(key).count()``.
2. Re-key: a stopped job with 8 tasks whose ``counts`` store holds 1M keys (one
   changelog record each) re-keyed to 4 tasks: read + compact + route + write + commit.

Run: ``.venv/bin/python -m bench.spark [--records N]`` (needs ``pip install -e '.[spark]'``).
Rates are for a ``local[2]`` session; the first figure includes no session start-up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from framework.config import JobConfig, load_config
from framework.coordinator.builder import build_job_model
from framework.coordinator.stream import publish_model
from framework.partitioner import partition_for_key
from framework.systems import open_system
from framework.systems.base import ProducerRecord

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "wordcount"
CHUNK = 50_000


async def _fill(config: JobConfig, records: int) -> tuple[float, float]:
    """Produce the input and a 1M-key changelog; publish an 8-task model. Seconds each."""
    system = open_system(config.system("local"))
    changelog = config.changelog_stream("counts").partition(".")[2]
    try:
        await system.create_stream("words", 8)
        await system.create_stream(changelog, 8, compacted=True)
        started = time.perf_counter()
        for start in range(0, records, CHUNK):
            await system.produce([
                ProducerRecord("words", f"word-{n % 10_000:05d}".encode(),
                               json.dumps({"seq": n // 10_000 + 1}).encode())
                for n in range(start, min(start + CHUNK, records))])
        produced = time.perf_counter() - started
        started = time.perf_counter()
        for start in range(0, records, CHUNK):
            batch = []
            for n in range(start, min(start + CHUNK, records)):
                key = f"key-{n:08d}".encode()
                batch.append(ProducerRecord(changelog, key, str(n % 97).encode(),
                                            partition=partition_for_key(key, 8)))
            await system.produce(batch)
        changelog_s = time.perf_counter() - started
        await publish_model(system, config, build_job_model(config, {"local.words": 8}, None))
    finally:
        await system.close()
    return produced, changelog_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="sampan-bench-spark-"))
    try:
        shutil.copytree(EXAMPLE, folder / "wordcount",
                        ignore=shutil.ignore_patterns("data", "__pycache__"))
        job = folder / "wordcount" / "job.toml"
        config = load_config(job)
        produce_s, changelog_s = asyncio.run(_fill(config, args.records))
        print(f"setup: produced {args.records:,} input records in {produce_s:.1f} s and "
              f"{args.records:,} changelog records in {changelog_s:.1f} s")

        from framework.spark import local_session
        from framework.spark.rekey import rekey_job

        started = time.perf_counter()
        spark = local_session()
        print(f"spark session start: {time.perf_counter() - started:.1f} s")
        frame = (spark.read.format("sampan").option("job", str(job))
                 .option("stream", "local.words").load())
        started = time.perf_counter()
        counted = frame.count()
        count_s = time.perf_counter() - started
        started = time.perf_counter()
        words = frame.groupBy("key").count().collect()
        group_s = time.perf_counter() - started
        print(f"read + count():          {counted:,} rows in {count_s:.1f} s = "
              f"{counted / count_s:,.0f} rows/s")
        print(f"read + groupBy(key):     {len(words):,} keys from {counted:,} rows in "
              f"{group_s:.1f} s = {counted / group_s:,.0f} rows/s")
        result = rekey_job(job, 4, spark=spark)
        keys = sum(result.keys.values())
        print(f"rekey 8 → 4 tasks:       {keys:,} keys in {result.seconds:.1f} s = "
              f"{keys / result.seconds:,.0f} keys/s")
        spark.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
