"""The sum job on a real Kafka-protocol broker (tansu): exact, and at-least-once after SIGKILL."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from jobs import harness as h
from jobs import jobfiles as jf
from jobs import outputs as out
from kafka_broker import TansuBroker

RECORDS = 100_000
KEYS = 1_000


def _job(tmp_path: Path, broker: TansuBroker) -> Path:
    """A job with its own job name and topics: the broker is shared by the whole session."""
    unique = uuid.uuid4().hex[:8]
    return jf.write_job(tmp_path / "job", name=f"sums-{unique}", system="kafka",
                       bootstrap=broker.bootstrap, events=f"events-{unique}")


async def test_sums_are_exact_on_kafka_without_crashes(kafka_broker: TansuBroker,
                                                        tmp_path: Path) -> None:
    config = jf.load(_job(tmp_path, kafka_broker))
    meta = await h.open_meta(config)
    try:
        model = await h.prepare(config, meta)
        work = out.Workload(KEYS, stream=jf.streams(config)[0])
        await h.produce(meta, work.records(RECORDS))
        _, result = await h.run_worker(config, model, RECORDS)
        assert (result.processed, result.skipped) == (RECORDS, 0)
        assert await out.changelog_state(meta, config) == work.totals
        assert await out.output_count(meta, config) == RECORDS
        assert out.exact_problems(await out.outputs(meta, config), work) == []
    finally:
        await meta.close()


async def test_a_sigkilled_kafka_worker_loses_nothing(kafka_broker: TansuBroker,
                                                       tmp_path: Path) -> None:
    """At-least-once: after a SIGKILL and a restart every key is present and no sum is short.

    The input comes in two halves, the second only after the kill: however fast the
    worker, the kill lands with input left (it cannot have finished the job first)."""
    path = _job(tmp_path, kafka_broker)
    config = jf.load(path)
    meta = await h.open_meta(config)
    try:
        await h.prepare(config, meta)
        work = out.Workload(KEYS, stream=jf.streams(config)[0])
        records = work.records(RECORDS)
        await h.produce(meta, records[:RECORDS // 2])

        async def outputs_reach(count: int) -> bool:
            return await out.output_count(meta, config) >= count

        async def checkpointed() -> int:
            checkpoints = await meta.read_checkpoints(config.name)
            return sum(sum(c.inputs.values()) for c in checkpoints.values())

        async def all_checkpointed() -> bool:
            return await checkpointed() == RECORDS

        with (tmp_path / "worker.log").open("ab") as log:
            worker = h.start_worker(path, log)
            try:
                await h.wait_until(lambda: outputs_reach(RECORDS // 6), 60, "a sixth of the "
                                   "outputs", worker)
                await asyncio.sleep(0.07)  # land anywhere in a commit cycle
            finally:
                h.kill(worker)
            assert worker.returncode == -9
            assert await checkpointed() <= RECORDS // 2  # nothing past what was produced
            await h.produce(meta, records[RECORDS // 2:])
            worker = h.start_worker(path, log)
            try:
                await h.wait_until(all_checkpointed, 60, "every input checkpointed", worker)
                assert await h.stop(worker) == 0
            finally:
                h.kill(worker)
        state = await out.changelog_state(meta, config)
        assert sorted(state) == sorted(work.totals)
        assert [k for k, total in work.totals.items() if state[k] < total] == []
        found = await out.outputs(meta, config)
        assert sorted(found) == sorted(work.totals)
        assert [k for k, total in work.totals.items() if found[k][-1]["sum"] < total] == []
        assert await out.output_count(meta, config) >= RECORDS
    finally:
        await meta.close()
