"""A running worker takes a hold placed and released in place (no restart): it reads a
held partition up to the hold, or stops where it is when it had read past the hold
already (Kafka: the coordinator saw the change after the worker read on), and once the
hold is released reads on from there — every output exact: none lost, none repeated,
each key's in order."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from jobs import harness as h
from jobs import jobfiles as jf
from jobs import outputs as out

from framework.coordinator.builder import build_job_model
from framework.metadata import publish_model
from framework.metadata.jobmodel import StreamHold
from framework.worker.runner import Worker
from groupers import SystemStreamPartition

pytestmark = pytest.mark.slow


def positions(worker: Worker) -> dict[int, int]:
    """Partition → where the worker's tasks have processed the input up to."""
    return {ssp.partition: at for i in worker.instances for ssp, at in i.positions.items()}


async def test_a_hold_placed_and_released_in_place_stops_reads_where_it_says(
        tmp_path: Path, where: tuple[str, str | None]) -> None:
    kind, bootstrap = where
    name = f"hold-in-place-{kind}-{uuid.uuid4().hex[:8]}"
    config = jf.load(jf.write_job(tmp_path / "job", name=name, system=kind,
                                bootstrap=bootstrap, events=name))
    meta = await h.open_meta(config)
    work = out.Workload(keys=40, stream=name)
    try:
        model = await h.prepare(config, meta)
        worker = Worker(config, 0, in_place=True)
        async with h.FedWorker(worker, meta, work) as fed:
            await h.wait_until(h.processed(worker, 300), 60, "the worker's first records")
            await fed.feed.stop()  # nothing is written while the hold is taken
            now = positions(worker)
            written = {p: r.end for p, r in (await meta.offsets(name)).items()}
            assert set(now) == set(written) == set(range(jf.PARTITIONS))
            # partition 0: a hold behind what the worker read (it stops where it is);
            # the others: past what is written (it reads up to the hold once it is, and
            # not one record further)
            ends = {p: at // 2 if p == 0 else written[p] + 30 for p, at in now.items()}
            hold = StreamHold(count=jf.PARTITIONS, ends=ends, exact=False,
                              refused=jf.PARTITIONS + 1)
            held = build_job_model(config, dict(model.partition_counts), model,
                                   holds={config.inputs[0]: hold})
            held = await publish_model(meta, config, replace(held, epoch=model.epoch + 1),
                                       previous=model, in_place=True)
            await h.wait_until(h.at_epoch(worker, held.epoch), 60, "the hold taken in place")
            stopped = positions(worker)[0]
            assert stopped >= now[0] > ends[0]
            fed.feed = h.SteadyFeed(meta, work)

            async def at_the_hold() -> bool:
                return all(positions(worker)[p] == ends[p] for p in ends if p)

            await h.wait_until(at_the_hold, 60, "every partition read up to the hold")
            await asyncio.sleep(1.5)  # the feed goes on: nothing past the hold is read
            assert positions(worker) == {**ends, 0: stopped}
            system_name, stream = config.inputs[0].split(".", 1)
            ssp = SystemStreamPartition(system_name, stream, 0)
            assert worker.routing.limits[ssp] == ends[0]

            released = build_job_model(config, dict(model.partition_counts), held, holds={})
            released = await publish_model(
                meta, config, replace(released, epoch=held.epoch + 1), previous=held,
                in_place=True)
            await h.wait_until(h.at_epoch(worker, released.epoch), 60, "the release")
            await fed.drain()
        result = await fed.result()
        assert result.epoch == released.epoch and worker.in_place_changes == 2
        assert out.exact_problems(await out.outputs(meta, config), work) == []
        checkpoints = await meta.read_checkpoints(config.name)
        assert {c.epoch for c in checkpoints.values()} == {released.epoch}
    finally:
        await meta.close()
