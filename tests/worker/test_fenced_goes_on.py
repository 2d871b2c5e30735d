"""A worker fenced by a newer model it can take in place keeps processing while it reads
that model (its publisher moves the fence first and writes the model after; under load
that takes a while), commits nothing meanwhile, and takes it without a restart once it is
written: on the local log and on Apache Kafka, every output checked."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from jobs import harness as h

from framework.coordinator.builder import build_job_model
from framework.metadata import publish_model
from framework.worker.runner import Worker

pytestmark = pytest.mark.slow

MODEL_LATE_S = 5.0
"""How long after the fence the newer model is written."""


@pytest.fixture(params=["local", "kafka"])
def where(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    """The metadata system and, for Kafka, the session broker (sync: it starts its own
    event loop)."""
    if request.param == "local":
        return "local", None
    return "kafka", request.getfixturevalue("kafka_broker").bootstrap


async def test_a_fenced_worker_processes_on_until_the_newer_model_is_written(
        tmp_path: Path, where: tuple[str, str | None]) -> None:
    system, bootstrap = where
    name = f"goes-on-{system}-{int(time.time() * 1000)}"
    config = h.load(h.write_job(tmp_path / "job", name=name, system=system,
                                bootstrap=bootstrap, events=name,
                                task="sum_task:StampedSumTask"))
    meta = await h.open_meta(config)
    work = h.Workload(keys=40, stream=name)
    feeding = asyncio.Event()
    feeding.set()

    async def feed() -> None:  # steady input: 20 records every 50 ms until told to stop
        while feeding.is_set():
            await h.produce(meta, work.records(20))
            await asyncio.sleep(0.05)

    try:
        model = await h.prepare(config, meta)
        worker = Worker(config, 0, in_place=True)
        running = asyncio.create_task(worker.run())
        producer = asyncio.create_task(feed())
        try:
            await h.wait_until(_processed(worker, 200), 60, "the worker's first records")
            newer = build_job_model(config, dict(model.partition_counts), model)
            newer = replace(newer, epoch=model.epoch + 1, in_place_since=model.epoch)
            await meta.advance_fence(config.name, newer.epoch, in_place=True)
            fenced_at = time.time()
            await asyncio.sleep(MODEL_LATE_S)
            written_at = time.time()
            await publish_model(meta, config, newer, fenced=True)

            async def took_it() -> bool:
                return worker.model is not None and worker.model.epoch == newer.epoch

            await h.wait_until(took_it, 60, "the worker taking epoch 2 in place")
            await asyncio.sleep(0.5)
            feeding.clear()
            await producer
            await h.wait_until(_processed(worker, work.count), 60, "every record")
        finally:
            feeding.clear()
            worker.stop.set()
            with contextlib.suppress(Exception):
                await producer
        result = await running
        assert result.epoch == newer.epoch and worker.in_place_changes == 1

        found = await h.outputs(meta, config)
        assert h.replay_problems(found, work) == []
        # Records were processed while the model was missing: from a second after the
        # fence (the worker noticed it at its next commit) until the model was written.
        stamps = sorted(o["t"] for outputs in found.values() for o in outputs)
        aside = [t for t in stamps if fenced_at + 1.0 < t < written_at]
        assert aside, (f"no record processed between the fence ({fenced_at:.2f}) and the "
                       f"model ({written_at:.2f})")
        checkpoints = await meta.read_checkpoints(config.name)
        assert {c.epoch for c in checkpoints.values()} == {newer.epoch}
    finally:
        await meta.close()


def _processed(worker: Worker, count: int) -> Any:
    async def enough() -> bool:
        return sum(i.processed for i in worker.instances) >= count
    return enough
