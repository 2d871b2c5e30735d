"""The per-key sum job exactly-once on Apache Kafka (the session broker)."""

from __future__ import annotations

from pathlib import Path

from aiokafka import AIOKafkaProducer
from eos_jobs import eos_job, output_records
from jobs import harness as h
from jobs import jobfiles as jf
from jobs import outputs as out
from kafka_broker import KafkaBroker

from framework.partitioner import partition_for_key as murmur2_partition

RECORDS = 100_000
KEYS = 1_000


async def test_sums_are_exact_under_exactly_once(kafka_broker: KafkaBroker,
                                                 tmp_path: Path) -> None:
    """One worker, no crash: store totals and one running-sum output per input record."""
    config = jf.load(eos_job(tmp_path, kafka_broker.bootstrap))
    assert config.guarantee == "exactly-once"
    meta = await h.open_meta(config)
    try:
        model = await h.prepare(config, meta)
        work = out.Workload(KEYS, stream=jf.streams(config)[0])
        await h.produce(meta, work.records(RECORDS))
        _, result = await h.run_worker(config, model, RECORDS, timeout=180)
        assert (result.processed, result.skipped) == (RECORDS, 0)
        assert await out.changelog_state(meta, config) == work.totals
        assert await output_records(meta, config) == RECORDS
        assert out.exact_problems(await out.outputs(meta, config), work) == []
    finally:
        await meta.close()


async def test_positions_reach_the_end_of_a_transactional_input(kafka_broker: KafkaBroker,
                                                                tmp_path: Path) -> None:
    """Inputs written in transactions (one aborted) end in control records: the worker
    processes the committed records only, and its checkpointed positions equal the
    input's end offsets — what expansion barriers and `sampan status` lag compare."""
    config = jf.load(eos_job(tmp_path, kafka_broker.bootstrap))
    events = jf.streams(config)[0]
    meta = await h.open_meta(config)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap,
                                transactional_id=f"{config.name}-upstream")
    await producer.start()
    try:
        model = await h.prepare(config, meta)
        work = out.Workload(KEYS, stream=events)
        for round_ in range(6):
            batch = work.records(2_000) if round_ != 3 else out.Workload(KEYS, seed=9,
                                                                      stream=events).records(500)
            await producer.begin_transaction()
            for record in batch:
                partition = murmur2_partition(record.key, jf.PARTITIONS)
                await producer.send(events, record.value, key=record.key, partition=partition)
            if round_ == 3:
                await producer.abort_transaction()  # these records must never be read
            else:
                await producer.commit_transaction()
        _, result = await h.run_worker(config, model, work.count, timeout=180)
        assert (result.processed, result.skipped) == (work.count, 0)
        assert out.exact_problems(await out.outputs(meta, config), work) == []
        ends = {p: r.end for p, r in (await meta.offsets(events)).items()}
        checkpoints = await meta.read_checkpoints(config.name)
        positions = {ssp.partition: offset for c in checkpoints.values()
                     for ssp, offset in c.inputs.items()}
        assert positions == ends
    finally:
        await producer.stop()
        await meta.close()
