"""Restore from a changelog on real Apache Kafka against a raw bulk put of the same records.

In one run, on one Apache Kafka broker started here (`tests/kafka_broker.py`, the pinned
release, a free 127.0.0.1 port, stopped at the end): ``--records`` changelog records
(16-byte random keys, 8-byte values: `bench.stores`' data) written once into one partition
of a compacted topic; then, in ``--rounds`` interleaved rounds, (a) plain rocksdict
batched puts of the same records (`bench.stores.raw_put_rate`) and (b) `restore_store`
of a fresh RocksDB store through the Kafka system's `changelog_reader` (what a worker does
on start: fetching from the broker included). Prints each round and the medians, records/s
and the process's CPU µs per record (all threads: RocksDB's background flushes too); the
target is a restore at ≥ 70% of raw puts' rate.

Run: ``.venv/bin/python -m bench.kafka_restore [--records N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import stores as store_bench
from bench.peers.broker import running_kafka
from framework.config import load_config
from framework.stores import RocksDBEngine, changelog_reader, restore_store
from framework.systems import open_system
from framework.systems.base import ProducerRecord, System
from groupers import SystemStreamPartition

RECORDS = 1_000_000
ROUNDS = 5
TOPIC = "bench-restore-changelog"


def _system(folder: Path, bootstrap: str) -> System:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "job.toml").write_text(f"""\
[job]
name = "bench-restore"
task = "task:Task"
inputs = ["kafka.unused"]

[systems.kafka]
type = "kafka"
bootstrap = "{bootstrap}"

[streams."kafka.unused"]
""")
    return open_system(load_config(folder / "job.toml").system("kafka"))


async def _write(system: System, keys: list[bytes], values: list[bytes]) -> None:
    await system.create_stream(TOPIC, 1, compacted=True)
    for at in range(0, len(keys), 10_000):
        await system.produce([ProducerRecord(TOPIC, k, v, partition=0) for k, v in
                              zip(keys[at:at + 10_000], values[at:at + 10_000], strict=True)])


async def _restore(system: System, path: Path, count: int) -> tuple[float, float]:
    """(records/s, CPU µs/record) from the Kafka partition into a fresh RocksDB store."""
    engine = RocksDBEngine(path, store="bench", task="Partition 0")
    ssp = SystemStreamPartition("kafka", TOPIC, 0)
    try:
        started, cpu = time.perf_counter(), time.process_time()
        result = await restore_store(
            engine, changelog=(TOPIC, 0),
            fetch=changelog_reader(system, ssp, count, batch_size=store_bench.BATCH),
            end=count, oldest=0, batch_size=store_bench.BATCH, progress=None)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    finally:
        engine.close()
    if result.records != count:
        raise RuntimeError(f"restored {result.records} records of {count}")
    return count / elapsed, cpu * 1e6 / count


def _raw_put(path: Path, keys: list[bytes], values: list[bytes]) -> tuple[float, float]:
    """(records/s, CPU µs/record) of plain rocksdict batched puts."""
    cpu = time.process_time()
    rate = store_bench.raw_put_rate(path, keys, values, store_bench.BATCH)
    return rate, (time.process_time() - cpu) * 1e6 / len(keys)


async def _rounds(bootstrap: str, work: Path, records: int, rounds: int
                  ) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    keys, values = store_bench._data(records)
    system = _system(work / "job", bootstrap)
    await system.start()
    try:
        await _write(system, keys, values)
        raw, restored = [], []
        for number in range(rounds):
            order = ("raw", "restore") if number % 2 == 0 else ("restore", "raw")
            for what in order:
                if what == "raw":
                    raw.append(_raw_put(work / f"raw{number}", keys, values))
                else:
                    restored.append(await _restore(system, work / f"restore{number}",
                                                   records))
            print(f"round {number + 1}: raw put {raw[-1][0]:,.0f} records/s "
                  f"({raw[-1][1]:.2f} CPU µs/record), restore from Kafka "
                  f"{restored[-1][0]:,.0f} ({restored[-1][1]:.2f}): "
                  f"{restored[-1][0] / raw[-1][0]:.0%}", flush=True)
        return raw, restored
    finally:
        await system.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=RECORDS)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sampan-bench-kafka-restore-"))
    try:
        with running_kafka() as cluster:
            raw, restored = asyncio.run(_rounds(cluster.bootstrap, work, args.records,
                                                args.rounds))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratios = [r[0] / p[0] for r, p in zip(restored, raw, strict=True)]
    raw_rate, raw_cpu = (statistics.median(column) for column in zip(*raw, strict=True))
    rate, cpu = (statistics.median(column) for column in zip(*restored, strict=True))
    print(f"medians of {args.rounds} rounds, {args.records:,} records "
          f"({store_bench.KEY_BYTES}-byte keys, {store_bench.VALUE_BYTES}-byte values):")
    print(f"raw rocksdict batched put:        {raw_rate:>12,.0f} records/s, "
          f"{raw_cpu:.2f} CPU µs/record")
    print(f"restore from a Kafka changelog:   {rate:>12,.0f} records/s, {cpu:.2f} CPU "
          f"µs/record ({rate / raw_rate:.0%} of raw puts' rate; per round "
          f"{', '.join(f'{r:.0%}' for r in ratios)}, median {statistics.median(ratios):.0%}; "
          f"target >= 70%)")


if __name__ == "__main__":
    main()
