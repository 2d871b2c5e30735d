"""A worker fenced by a newer model it can take in place keeps processing while it reads
that model (its publisher moves the fence first and writes the model after; under load
that takes a while), commits nothing meanwhile, and takes it without a restart once it is
written: on the local log and on Apache Kafka, every output checked."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path

import pytest
from jobs import harness as h
from jobs import outputs as out

from framework.coordinator.builder import build_job_model
from framework.metadata import publish_model
from framework.worker.runner import Worker

pytestmark = pytest.mark.slow

MODEL_LATE_S = 5.0
"""How long after the fence the newer model is written."""


async def test_a_fenced_worker_processes_on_until_the_newer_model_is_written(
        tmp_path: Path, where: tuple[str, str | None]) -> None:
    config, meta, work = await h.stamped_job(tmp_path / "job", "goes-on", *where)
    try:
        model = await h.prepare(config, meta)
        worker = Worker(config, 0, in_place=True)
        async with h.FedWorker(worker, meta, work) as fed:
            await h.wait_until(h.processed(worker, 200), 60, "the worker's first records")
            newer = build_job_model(config, dict(model.partition_counts), model)
            newer = replace(newer, epoch=model.epoch + 1, in_place_since=model.epoch)
            await meta.advance_fence(config.name, newer.epoch, in_place=True)
            fenced_at = time.time()
            await asyncio.sleep(MODEL_LATE_S)
            written_at = time.time()
            await publish_model(meta, config, newer, fenced=True)
            await h.wait_until(h.at_epoch(worker, newer.epoch), 60, "the worker taking "
                               "epoch 2 in place")
            await asyncio.sleep(0.5)
            await fed.drain()
        result = await fed.result()
        assert result.epoch == newer.epoch and worker.in_place_changes == 1

        found = await out.outputs(meta, config)
        assert out.replay_problems(found, work) == []
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

