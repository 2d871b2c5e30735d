"""A worker asks the fence aside (its tasks go on meanwhile); an answer that comes after
it took a newer model in place is about the epoch it left and is dropped. Before, such an
answer fenced it again: it waited for a model newer still, found none and restarted."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from jobs import harness as h
from jobs import outputs as out

from framework.coordinator.builder import build_job_model
from framework.metadata import publish_model
from framework.worker import following
from framework.worker.runner import Worker

pytestmark = pytest.mark.slow

SLOW_S = 2.0
"""How long each of the worker's fence checks takes to be answered here."""


class SlowFenceWorker(Worker):
    """A worker whose metadata system answers fence checks ``SLOW_S`` after they were
    asked (the question names the epoch of when it was asked)."""

    async def _check_fence(self) -> None:
        assert self.model is not None
        epoch = self.model.epoch
        await asyncio.sleep(SLOW_S)
        await self.systems[self.config.metadata_system].check_fence(self.config.name, epoch)


async def test_a_fence_answer_for_the_epoch_the_worker_left_does_not_stop_it(
        tmp_path: Path, where: tuple[str, str | None], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(following, "MODEL_WAIT_S", 1.0)  # a wrongly fenced worker stops soon
    config, meta, work = await h.stamped_job(tmp_path / "job", "stale-fence", *where)
    try:
        model = await h.prepare(config, meta)
        worker = SlowFenceWorker(config, 0, in_place=True)
        async with h.FedWorker(worker, meta, work) as fed:
            await h.wait_until(h.processed(worker, 200), 60, "the worker's first records")

            async def asking() -> bool:  # from then on one is always in flight
                return worker.following.fence_check is not None

            await h.wait_until(asking, 30, "a fence check in flight")
            newer = build_job_model(config, dict(model.partition_counts), model)
            newer = await publish_model(meta, config, replace(newer, epoch=model.epoch + 1),
                                        previous=model, in_place=True)
            await h.wait_until(h.at_epoch(worker, newer.epoch), 60, "the worker taking "
                               "epoch 2 in place")
            # every check asked at epoch 1 is answered (fenced) within SLOW_S; a worker
            # that heeded one would have stopped MODEL_WAIT_S later
            await asyncio.sleep(SLOW_S + following.MODEL_WAIT_S + 1.5)
            assert not fed.running.done(), fed.running.exception()
            await fed.drain()
        result = await fed.result()
        assert result.epoch == newer.epoch and worker.in_place_changes == 1
        assert out.replay_problems(await out.outputs(meta, config), work) == []
        checkpoints = await meta.read_checkpoints(config.name)
        assert {c.epoch for c in checkpoints.values()} == {newer.epoch}
    finally:
        await meta.close()
