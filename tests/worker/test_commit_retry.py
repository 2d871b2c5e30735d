"""A commit refused by a newer epoch's fence is written again, once, at that epoch
(`Committer.retry_at`: how a worker that takes a model in place keeps its uncommitted work).

On the local log the refusal comes with nothing written (one transaction); on Kafka with
at-least-once the outputs and changelog records have landed and only the checkpoints were
refused, so only they are written again; with exactly-once the epoch is checked before the
transaction begins. Every case: each output and changelog record exactly once, the
checkpoint at the new epoch.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from jobs import harness as h
from jobs import jobfiles as jf
from jobs import outputs as out

from framework.api import StreamTask
from framework.coordinator.builder import build_job_model
from framework.errors import FencedError
from framework.metadata import publish_model
from framework.worker.codec import RecordCodec
from framework.worker.commit import Committer, begin_commits
from framework.worker.instance import TaskInstance
from framework.worker.task_stores import open_task_stores

RECORDS = 25


class Quiet(StreamTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        """Not called: the test fills the instance's outputs and store itself."""


async def test_a_refused_commit_is_written_again_once_on_the_local_log(
        tmp_path: Path) -> None:
    await refused_then_written_again(tmp_path, "local", None, "at-least-once")


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
async def test_a_refused_commit_is_written_again_once_on_kafka(
        tmp_path: Path, kafka_broker: Any, guarantee: str) -> None:
    await refused_then_written_again(tmp_path, "kafka", kafka_broker.bootstrap, guarantee)


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
async def test_a_commit_in_flight_when_the_model_is_taken_is_written_again_once(
        tmp_path: Path, kafka_broker: Any, guarantee: str) -> None:
    """`retry_at` while the refused commit is still in flight (a worker that noticed the
    fence at its fence check): the refusal is its own, kept and written again."""
    await refused_then_written_again(tmp_path, "kafka", kafka_broker.bootstrap, guarantee,
                                     settled=False)


async def refused_then_written_again(tmp_path: Path, system: str, bootstrap: str | None,
                                     guarantee: str, *, settled: bool = True) -> None:
    """A commit at epoch 1 refused by epoch 2 (published in place), then `retry_at(2)`."""
    extra = f'guarantee = "{guarantee}"\n'
    name = f"retry-{system}-{guarantee[:5]}-{settled:d}-{os.getpid()}"
    config = jf.load(jf.write_job(tmp_path / "job", name=name, system=system,
                                bootstrap=bootstrap, job_extra=extra, events=name))
    meta = await h.open_meta(config)
    try:
        model = await h.prepare(config, meta)
        await begin_commits(config, 0, meta)
        task = model.tasks_of(0)[0]
        opened = await open_task_stores(config, task, None, meta)
        instance = TaskInstance(task.name, Quiet(), task.ssps, opened.stores, config,
                                {ssp: 7 for ssp in task.ssps})
        committer = Committer(
            config, {config.metadata_system: meta}, RecordCodec(config), model.epoch,
            {t.name: t.changelog_partition for t in model.tasks.values()},
            {(task.name, s): p for s, p in opened.positions.items()})
        sums = f"{system}.{jf.streams(config)[1]}"
        for n in range(RECORDS):
            instance.send(sums, key=f"k{n}", value={"n": n})
            instance.stores["totals"].put(f"k{n}", n)
        newer = build_job_model(config, dict(model.partition_counts), model)
        newer = await publish_model(meta, config, newer, previous=model, in_place=True)
        assert (newer.epoch, newer.in_place_since) == (2, 1)

        if settled:
            with pytest.raises(FencedError, match="commit of epoch 1 refused"):
                await committer.start([instance])
                await committer.settle()
            assert committer.refused is not None
        else:
            await committer.start([instance])  # in flight: the fence refuses it as it lands
        await committer.retry_at(newer.epoch)
        assert committer.refused is None and committer.epoch == 2

        found = await out.outputs(meta, config)
        assert found == {f"k{n}": [{"n": n}] for n in range(RECORDS)}
        assert await out.changelog_state(meta, config) == {f"k{n}": n for n in range(RECORDS)}
        assert sum((await out.changelog_ends(meta, config)).values()) == RECORDS
        checkpoint = (await meta.read_checkpoints(config.name))[task.name]
        assert checkpoint.epoch == 2
        assert dict(checkpoint.inputs) == {ssp: 7 for ssp in task.ssps}
        assert instance.stores["totals"].get("k3") == 3
        for store in instance.stores.values():
            store.close()
    finally:
        if system == "kafka" and getattr(meta, "transactions", None) is not None:
            await meta.transactions.close()  # type: ignore[attr-defined]
        await meta.close()
