"""Input expansion under exactly-once on real Apache Kafka: the input grows from 4 to 8
partitions while `sampan run` runs (and a worker is SIGKILLed during the expansion); every
output record is there exactly once, in order per key."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from jobs import harness as h
from jobs import jobfiles as jf
from jobs import outputs as out
from jobs.outputs import checkpointed, exact_outputs
from jobs.runs import SumRun
from kafka_broker import KafkaBroker

from framework.metadata import read_state

RECORDS = 30_000
KEYS = 500


@pytest.mark.timeout(600)
async def test_expansion_under_exactly_once_stays_exact(kafka_broker: KafkaBroker,
                                                        tmp_path: Path) -> None:
    run = SumRun(tmp_path / "job", kafka_broker.bootstrap)
    config = run.config
    events = jf.streams(config)[0]
    work = out.Workload(KEYS, stream=events)
    meta = await h.open_meta(config)
    try:
        run.start()

        async def healthy() -> bool:
            return run.status()[0] == 0
        await run.wait(healthy, "a healthy job", 180)
        await h.produce(meta, work.records(RECORDS // 3))

        async def committed(target: int) -> bool:
            return await checkpointed(meta, config) >= target
        await run.wait(lambda: committed(RECORDS // 6), "the first commits", 180)
        before = (await read_state(meta, config)).model
        assert before is not None and before.partition_counts[config.inputs[0]] == jf.PARTITIONS
        await meta.expand_stream(events, 2 * jf.PARTITIONS)
        await h.produce(meta, work.records(RECORDS // 3))  # keyed over 8 partitions now
        pid = sorted(run.worker_pids().items())[0][1]
        os.kill(pid, signal.SIGKILL)

        async def expanded() -> bool:
            model = (await read_state(meta, config)).model
            return model is not None and model.partition_counts[
                config.inputs[0]] == 2 * jf.PARTITIONS
        await run.wait(expanded, "the expanded model", 180)
        await h.produce(meta, work.records(RECORDS - work.count))
        await run.wait(lambda: committed(RECORDS), "every input committed", 300)
        assert await run.stop() == 0
        assert await checkpointed(meta, config) == RECORDS
        assert await exact_outputs(meta, config, work) == []
    finally:
        run.kill()
        await meta.close()
    assert "Traceback" not in run.logs_text(tail=10**7)
