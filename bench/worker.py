"""Worker benchmark: the per-key sum job on local and on tansu, restore, and raw baselines.

In one run on one machine:

- sum throughput: one in-process `Worker` (4 input partitions, 4 tasks, one logged
  RocksDB store) over 1M JSON records with 10k keys, timed from start to the moment
  every record is processed and committed; on the local log, then on a tansu broker
  started here on a free 127.0.0.1 port (stopped after);
- restore: 1M changelog records (16-byte keys, 8-byte values) in one partition of the
  local log, restored into a fresh RocksDB store with `restore_store` and
  `changelog_reader` (changelog records/s, reading included); and `restore_store` from
  in-memory batches (`bench.stores`, RocksDB writes only);
- raw baselines: plain aiokafka ``getmany`` reading the same 1M input records from
  tansu, and plain rocksdict batched puts (`bench.stores`);
- ceilings on tansu (`bench.kafka_floor`): plain aiokafka copying every input record to
  an output topic, and a hand-written minimal sum (JSON, a dict, one output per record)
  with no framework at all, with the stdlib's ``json`` and with ``orjson`` — what any
  one-process worker of this job can at most reach.

Restore and raw-put figures are the median of three runs each (both vary by ±20% from
run to run on a small machine, mostly with RocksDB's background flushes).

The sum job and the ceilings run in ``--rounds`` (default 3) interleaved rounds, each on
a fresh tansu, the two workers bracketed by two runs of the hand-written orjson sum
(compared with their mean); the medians are the figures.

Run: ``.venv/bin/python -m bench.worker`` (``--records N --keys K`` for a smaller run,
``--sums-only`` for the sum job and its ceilings alone). ``--broker kafka`` (or
``apache-kafka``) runs the Kafka figures on Apache Kafka (`tests/kafka_broker.py`, one
fresh broker per round) instead of tansu, and adds the restore rate from a Kafka changelog
topic into RocksDB.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import kafka_floor
from bench import stores as store_bench
from bench.sum_task import sum_task_source
from bench.systems_baseline import tansu
from framework.config import JobConfig, load_config
from framework.config.sections import SystemConfig
from framework.coordinator.builder import build_job_model
from framework.metadata import publish_model
from framework.metadata.jobmodel import JobModel
from framework.stores import RocksDBEngine, changelog_reader, restore_store
from framework.systems import open_system
from framework.systems.base import ProducerRecord, System
from framework.systems.local.system import LocalSystem
from framework.worker.runner import Worker
from groupers import SystemStreamPartition

RECORDS = 1_000_000
KEYS = 10_000
PARTITIONS = 4
ROUNDS = 3



@dataclass(frozen=True)
class Figures:
    """Records per second of each measured path."""

    local_sum: float
    local_restore: float
    kafka_sum: float
    kafka_raw_consume: float
    kafka_pass_through: float
    kafka_minimal_sum: float
    kafka_minimal_sum_orjson: float
    raw_put: float
    restore_store: float


def _job(folder: Path, system: str, bootstrap: str | None) -> JobConfig:
    folder.mkdir(parents=True)
    (folder / "sum_task.py").write_text(sum_task_source('f"{envelope.ssp.system}.sums"'))
    where = f'bootstrap = "{bootstrap}"' if bootstrap else 'path = "data"'
    (folder / "job.toml").write_text(f"""\
[job]
name = "bench-sums"
task = "sum_task:SumTask"
inputs = ["{system}.events"]
fetch_max_records = 5000

[systems.{system}]
type = "{system}"
{where}

[streams."{system}.events"]
[streams."{system}.sums"]
[stores.totals]
""")
    return load_config(folder / "job.toml")


def _records(count: int, keys: int) -> list[ProducerRecord]:
    rng = random.Random(7)
    names = [f"key-{n:05d}".encode() for n in range(keys)]
    return [ProducerRecord("events", rng.choice(names),
                           json.dumps({"amount": rng.randint(1, 9)}).encode())
            for _ in range(count)]


async def _prepare(config: JobConfig, system: System, records: list[ProducerRecord]) -> JobModel:
    await system.create_stream("events", PARTITIONS, exist_ok=True)
    await system.create_stream("sums", PARTITIONS, exist_ok=True)
    model = build_job_model(config, {config.inputs[0]: PARTITIONS}, None)
    await system.create_stream(config.changelog_stream("totals").partition(".")[2],
                               model.changelog_partitions, compacted=True, exist_ok=True)
    await publish_model(system, config, model)
    for at in range(0, len(records), 10_000):
        await system.produce(records[at:at + 10_000])
    return model


async def _run_worker(config: JobConfig, model: JobModel, records: int) -> tuple[Worker, float]:
    """Seconds from start until ``records`` are processed and committed (then a clean stop)."""
    worker = Worker(config, 0, model=model)
    started = time.perf_counter()
    running = asyncio.create_task(worker.run())
    while sum(i.processed for i in worker.instances) < records:
        if running.done():
            await running
            raise RuntimeError("the worker stopped early")
        await asyncio.sleep(0.005)
    worker.stop.set()
    await running  # includes the final commit
    return worker, time.perf_counter() - started


async def _prepared(config: JobConfig, records: list[ProducerRecord]) -> JobModel:
    """The sum job's streams created, its model published and ``records`` written."""
    meta = open_system(config.system(config.metadata_system))
    await meta.start()
    try:
        return await _prepare(config, meta, records)
    finally:
        await meta.close()


async def _rate(config: JobConfig, model: JobModel, records: int) -> float:
    """Records/s of the sum job over its prepared input."""
    _, elapsed = await _run_worker(config, model, records)
    return records / elapsed


async def _sum(config: JobConfig, records: list[ProducerRecord]) -> float:
    """Records/s of the sum job over ``records`` (prepared first, not timed)."""
    return await _rate(config, await _prepared(config, records), len(records))


async def _local_restore(path: Path, keys: list[bytes], values: list[bytes]) -> float:
    """Changelog records/s from a local-log partition into a fresh RocksDB store."""
    return await _restore(LocalSystem("local", path / "log"), path, keys, values)


async def _kafka_restore(bootstrap: str, path: Path, keys: list[bytes], values: list[bytes]
                         ) -> float:
    """Changelog records/s from a Kafka topic's partition into a fresh RocksDB store."""
    system = open_system(SystemConfig(name="kafka", type="kafka", bootstrap=bootstrap,
                                      client_options={"namespace": f"{path.name}."}))
    await system.start()
    return await _restore(system, path, keys, values)


async def _restore(system: System, path: Path, keys: list[bytes], values: list[bytes]
                   ) -> float:
    """Changelog records/s from ``system``'s partition into a fresh RocksDB store (the
    changelog is written first, not timed); closes ``system``."""
    await system.create_stream("changelog", 1, compacted=True)
    for at in range(0, len(keys), 10_000):
        await system.produce([ProducerRecord("changelog", k, v, partition=0) for k, v in
                              zip(keys[at:at + 10_000], values[at:at + 10_000], strict=True)])
    engine = RocksDBEngine(path / "store", store="bench", task="Partition 0")
    ssp = SystemStreamPartition(system.name, "changelog", 0)
    try:
        started = time.perf_counter()
        result = await restore_store(
            engine, changelog=("changelog", 0),
            fetch=changelog_reader(system, ssp, len(keys), batch_size=store_bench.BATCH),
            end=len(keys), oldest=0, batch_size=store_bench.BATCH, progress=None)
        elapsed = time.perf_counter() - started
    finally:
        engine.close()
        await system.close()
    assert result.records == len(keys), result
    return len(keys) / elapsed


async def _raw_consume(bootstrap: str, count: int) -> float:
    """Records/s of plain aiokafka ``getmany`` over the input topic."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition("events", p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        started = time.perf_counter()
        seen = 0
        while seen < count:
            batch = await consumer.getmany(timeout_ms=1_000, max_records=10_000)
            seen += sum(len(records) for records in batch.values())
        return seen / (time.perf_counter() - started)
    finally:
        await consumer.stop()


async def _floor(bootstrap: str, count: int, output: str, transform: kafka_floor.Transform
                 ) -> float:
    """Records/s of one plain-aiokafka loop over the input topic into a new ``output``."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(output, PARTITIONS, 1)])
    finally:
        await admin.close()
    return await kafka_floor.rate(bootstrap, "events", PARTITIONS, output, count, transform)


async def _orjson_sum(bootstrap: str, count: int, tag: str) -> float:
    """The hand-written orjson sum (output topic named with ``tag``)."""
    return await _floor(bootstrap, count, f"floor-sums-orjson{tag}",
                        kafka_floor.minimal_sum(orjson.loads, orjson.dumps))


async def _ceilings(bootstrap: str, count: int) -> tuple[float, float, float]:
    """(pass-through, minimal sum with json, minimal sum with orjson) records/s of plain
    aiokafka over the input topic."""
    return (await _floor(bootstrap, count, "floor-copy", kafka_floor.pass_through()),
            await _floor(bootstrap, count, "floor-sums", kafka_floor.minimal_sum()),
            await _orjson_sum(bootstrap, count, ""))


def _freeze() -> None:
    """Freeze the heap before a measured run: the input held here (a tracked object per
    record) is no part of a worker or of a hand-written loop, so no full collection of
    either should walk it. Again before every run: a worker unfreezes the heap when its
    loop ends (`framework.worker.collector`), which would leave the next run walking it."""
    gc.collect()
    gc.freeze()


def _median(runs: int, measure: Callable[[int], float]) -> float:
    return statistics.median(measure(run) for run in range(runs))


@contextlib.contextmanager
def _broker(kind: str) -> Iterator[str]:
    """A fresh broker's bootstrap for one round: tansu, or Apache Kafka."""
    if kind == "tansu":
        with tansu() as bootstrap:
            yield bootstrap
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from kafka_broker import running_kafka

    with running_kafka() as cluster:
        yield cluster.bootstrap


def run(records: int = RECORDS, keys: int = KEYS, sums_only: bool = False,
        rounds: int = ROUNDS, broker: str = "tansu") -> Figures:
    """Measure every figure and print them with the targets (``sums_only``: the sum job
    and the ceilings only, no restore or raw-put figures).

    The sum job and its ceilings run in ``rounds`` interleaved rounds, each on a fresh
    tansu: the hand-written orjson sum, the worker on local, the worker on tansu, raw
    consume, the ceilings (the orjson sum again last). The workers are compared with the
    mean of the two orjson runs that bracket them: this machine's speed drifts by a third
    over minutes, and one ceiling run half a minute after a worker's measured that drift
    as much as the worker. Each round's figures are printed and the medians are the
    result."""
    data = _records(records, keys)
    print(f"per-key sum: {records:,} JSON records, {keys:,} keys, {PARTITIONS} partitions, "
          f"1 worker, logged RocksDB store; {rounds} interleaved round(s)")
    work = Path(tempfile.mkdtemp(prefix="sampan-bench-worker-"))
    try:
        each: list[tuple[float, float, float, float, float, float]] = []
        restores: list[float] = []
        for number in range(rounds):
            with _broker(broker) as bootstrap:
                kafka_job = _job(work / f"kafka{number}", "kafka", bootstrap)
                model = asyncio.run(_prepared(kafka_job, data))
                _freeze()
                orjson_before = asyncio.run(_orjson_sum(bootstrap, records, "-before"))
                _freeze()
                local_sum = asyncio.run(_sum(_job(work / f"local{number}", "local", None),
                                             data))
                _freeze()
                kafka_sum = asyncio.run(_rate(kafka_job, model, records))
                _freeze()
                raw_consume = asyncio.run(_raw_consume(bootstrap, records))
                _freeze()
                copy, sums, orjson_after = asyncio.run(_ceilings(bootstrap, records))
                if broker == "kafka" and not sums_only:
                    keys_raw, values_raw = store_bench._data(records)
                    restores.append(asyncio.run(_kafka_restore(
                        bootstrap, work / f"kafka-restore{number}", keys_raw, values_raw)))
            orjson_mean = (orjson_before + orjson_after) / 2
            each.append((local_sum, kafka_sum, raw_consume, copy, sums, orjson_mean))
            if rounds > 1:
                print(f"round {number + 1}: local {local_sum:,.0f}, {broker} {kafka_sum:,.0f}, "
                      f"orjson sum {orjson_before:,.0f} before and {orjson_after:,.0f} after "
                      f"records/s (local {local_sum / orjson_mean:.0%}, "
                      f"{broker} {kafka_sum / orjson_mean:.0%} of their mean)", flush=True)
        medians = [statistics.median(column) for column in zip(*each, strict=True)]
        local_sum, kafka_sum, raw_consume, pass_through, minimal_sum, orjson_sum = medians
        if rounds > 1:  # ratios within a round compare runs a minute apart, not ten
            for name, index in (("local", 0), (broker, 1)):
                ratios = [one[index] / one[5] for one in each]
                print(f"{name} / hand-written orjson sum, per round: "
                      f"{', '.join(f'{r:.0%}' for r in ratios)}; median "
                      f"{statistics.median(ratios):.0%}")
        if sums_only:
            _print_sums(*medians, rounds, broker)
            return Figures(local_sum, 0.0, kafka_sum, raw_consume, pass_through, minimal_sum,
                           orjson_sum, 0.0, 0.0)
        keys_raw, values_raw = store_bench._data(records)
        raw_put = _median(3, lambda n: store_bench.raw_put_rate(
            work / f"raw{n}", keys_raw, values_raw, store_bench.BATCH))
        restore_memory = _median(3, lambda n: store_bench.restore_rate(
            work / f"restore{n}", keys_raw, values_raw, store_bench.BATCH))
        local_restore = _median(3, lambda n: asyncio.run(
            _local_restore(work / f"changelog{n}", keys_raw, values_raw)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    figures = Figures(local_sum, local_restore, kafka_sum, raw_consume, pass_through,
                      minimal_sum, orjson_sum, raw_put, restore_memory)
    _print_sums(*medians, rounds, broker)
    print(f"restore, local changelog -> RocksDB:     {local_restore:>12,.0f} records/s "
          f"({local_restore / raw_put:.0%} of raw puts; target >= 70%)")
    if restores:
        kafka_restore = statistics.median(restores)
        print(f"restore, Kafka changelog -> RocksDB:     {kafka_restore:>12,.0f} records/s "
              f"({kafka_restore / raw_put:.0%} of raw puts; per round "
              f"{', '.join(f'{r:,.0f}' for r in restores)})")
    print(f"restore, in-memory batches -> RocksDB:   {restore_memory:>12,.0f} records/s "
          f"({restore_memory / raw_put:.0%} of raw puts)")
    print(f"raw rocksdict batched put:               {raw_put:>12,.0f} records/s")
    return figures


def _print_sums(local_sum: float, kafka_sum: float, raw_consume: float, pass_through: float,
                minimal_sum: float, orjson_sum: float, rounds: int = 1,
                broker: str = "tansu") -> None:
    if rounds > 1:
        print(f"medians of {rounds} rounds:")
    print(f"sum on local (worker):                   {local_sum:>12,.0f} records/s "
          f"({local_sum / orjson_sum:.0%} of the hand-written orjson sum; target >= 60%)")
    print(f"sum on {broker + ' (worker):':<33} {kafka_sum:>12,.0f} records/s "
          f"({kafka_sum / orjson_sum:.0%} of the hand-written orjson sum; target >= 60%)")
    print(f"raw consume on {broker} (aiokafka getmany): {raw_consume:>12,.0f} records/s")
    print(f"ceiling: aiokafka copy, no processing:   {pass_through:>12,.0f} records/s "
          f"({pass_through / raw_consume:.0%} of raw consume)")
    print(f"ceiling: hand-written sum, no framework: {minimal_sum:>12,.0f} records/s "
          f"({minimal_sum / raw_consume:.0%} of raw consume)")
    print(f"ceiling: the same with orjson:           {orjson_sum:>12,.0f} records/s "
          f"({orjson_sum / raw_consume:.0%} of raw consume)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=RECORDS)
    parser.add_argument("--keys", type=int, default=KEYS)
    parser.add_argument("--sums-only", action="store_true",
                        help="only the sum job and its ceilings (no restore, no raw puts)")
    parser.add_argument("--rounds", type=int, default=ROUNDS,
                        help="interleaved rounds of the sum job and its ceilings (medians)")
    parser.add_argument("--broker", choices=("tansu", "kafka", "apache-kafka"), default="tansu",
                        help="the Kafka-protocol broker of the Kafka figures: tansu, or Apache "
                        "Kafka (kafka or apache-kafka, as bench.worker_profile names it: "
                        "tests/kafka_broker.py; adds a Kafka changelog restore)")
    args = parser.parse_args()
    if args.broker == "apache-kafka":
        args.broker = "kafka"
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    run(args.records, args.keys, args.sums_only, args.rounds, args.broker)


if __name__ == "__main__":
    main()
