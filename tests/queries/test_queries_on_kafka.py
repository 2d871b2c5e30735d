"""Queries while the per-key sum job runs on real Apache Kafka (exactly-once, one host):
the input grows 2 → 4 → 8 and a worker is SIGKILLed while a querier asks for random
keys. Every answer is checked exactly against the store's changelog and the job's
outputs, per key never backwards (tests/queries/queryjobs.py); every output record is
checked too. Figures are logged, never asserted."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from jobs import harness as h
from jobs import jobfiles as jf
from jobs import outputs as out
from jobs.outputs import checkpointed, exact_outputs
from jobs.runs import SumRun
from kafka_broker import KafkaBroker
from queryjobs import Querier, changelog_records, wrong_answers

from framework.metadata import read_state
from framework.queries.client import Client
from framework.systems.base import System

log = logging.getLogger(__name__)

KEYS = 200


def queried_run(folder: Path, bootstrap: str) -> SumRun:
    """The sum job with its input at 2 partitions, its store keyed by the input and
    [queries] on."""
    run = SumRun(folder, bootstrap)
    events = jf.streams(run.config)[0]
    text = run.path.read_text().replace(
        f'[streams."kafka.{events}"]\npartitions = {jf.PARTITIONS}',
        f'[streams."kafka.{events}"]\npartitions = 2').replace(
        "[stores.totals]\n", f'[stores.totals]\nkeyed_by = "kafka.{events}"\n')
    run.path.write_text(text + "\n[queries]\nenabled = true\n")
    run.config = jf.load(run.path)
    return run


async def produce_until(meta: System, work: out.Workload, stop: asyncio.Event) -> None:
    while not stop.is_set():
        await h.produce(meta, work.records(100))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.1)


@pytest.mark.timeout(900)
async def test_queries_on_kafka_stay_exact_through_expansions_and_a_killed_worker(
        kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    run = queried_run(tmp_path / "job", kafka_broker.bootstrap)
    config = run.config
    events = jf.streams(config)[0]
    work = out.Workload(KEYS, stream=events)
    meta = await h.open_meta(config)
    client = Client(config, retry_for=0)
    querier = Querier(client, "totals", [f"key-{i:05d}" for i in range(KEYS)])
    stop_queries, stop_input = asyncio.Event(), asyncio.Event()
    try:
        run.start()

        async def healthy() -> bool:
            return run.status()[0] == 0
        await run.wait(healthy, "a healthy job", 180)
        producing = asyncio.create_task(produce_until(meta, work, stop_input))

        async def answering() -> bool:  # unavailability is measured from here
            state = await read_state(meta, config)
            return (all(state.workers.get(w) is not None and state.workers[w].resumed_ms
                        for w in range(config.workers))
                    and len([e for e in state.queries.values() if e.url]) == config.workers)
        await run.wait(answering, "every worker running and answering queries", 180)
        querying = asyncio.create_task(querier.run(stop_queries))

        def answers(count: int) -> Callable[[], Awaitable[bool]]:
            async def enough() -> bool:
                return len(querier.answers) >= count
            return enough
        try:
            await run.wait(answers(100), "100 answers at 2 partitions", 180)
            for count in (4, 8):
                await meta.expand_stream(events, count)

                async def expanded(count: int = count) -> bool:
                    model = (await read_state(meta, config)).model
                    return model is not None and model.partition_counts[
                        config.inputs[0]] == count
                await run.wait(expanded, f"the model of {count} partitions", 180)
                await run.wait(answers(len(querier.answers) + 100),
                               f"100 answers at {count} partitions", 180)
            worker, killed = sorted(run.worker_pids().items())[-1]
            os.kill(killed, signal.SIGKILL)

            async def restarted() -> bool:
                report = (await read_state(meta, config)).workers.get(worker)
                return (report is not None and report.pid != killed
                        and report.resumed_ms is not None and report.stopped_ms is None)
            await run.wait(restarted, f"worker {worker} restarted after SIGKILL", 180)
            await run.wait(answers(len(querier.answers) + 200), "200 answers after the restart",
                           180)
        finally:
            stop_input.set()
            await producing

        async def committed() -> bool:
            return await checkpointed(meta, config) >= work.count
        await run.wait(committed, "every input committed", 300)
        stop_queries.set()
        await querying
        totals = work.totals
        final: dict[str, int] = {}

        async def final_totals() -> bool:  # the last commits' values, once applied
            for key in totals:
                final[key] = (await client.get("totals", key)).value
            return final == totals
        await run.wait(final_totals, "every key's final total answered", 120)
        log.warning("queries on Kafka through 2→4→8 and a SIGKILLed worker: %s",
                    querier.figures())
        assert await run.stop() == 0
        assert await exact_outputs(meta, config, work) == []
        state = await read_state(meta, config)
        assert state.model is not None
        records = await changelog_records(meta, config, "totals")
        sums = {key: {o["sum"] for o in found}
                for key, found in (await out.outputs(meta, config)).items()}
        assert wrong_answers(querier.answers, state.model, records, sums) == []
        assert len(querier.answers) >= 600
    finally:
        stop_queries.set()
        stop_input.set()
        await client.close()
        run.kill()
        await meta.close()
    assert "Traceback" not in run.logs_text(tail=10**7)
