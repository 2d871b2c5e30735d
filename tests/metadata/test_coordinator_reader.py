"""`CoordinatorReader` follows the coordinator stream incrementally and always agrees with
a full replay (`read_state`), on the local log, Apache Kafka and tansu."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from framework.config import JobConfig, parse_config
from framework.metadata import (
    CoordinatorReader,
    CoordinatorState,
    WorkerReport,
    first_state,
    publish_model,
    publish_worker_report,
    read_state,
)
from framework.metadata.jobmodel import JobModel
from framework.systems import open_system
from framework.systems.base import System

pytestmark = pytest.mark.slow


@pytest.fixture(params=("local", "kafka", "tansu"))
def config(request: pytest.FixtureRequest, tmp_path: Path) -> JobConfig:
    """A job of its own (fresh coordinator stream) on the metadata system under test."""
    if request.param == "local":
        system = {"type": "local", "path": str(tmp_path / "log")}
    else:
        broker = request.getfixturevalue(f"{request.param}_broker")
        system = {"type": "kafka", "bootstrap": broker.bootstrap}
    name = f"j-{uuid.uuid4().hex[:10]}"
    return parse_config({
        "job": {"name": name, "task": "m:T", "inputs": ["meta.a"]},
        "systems": {"meta": system}, "streams": {"meta.a": {"partitions": 2}},
    }, tmp_path / "j.toml")


@pytest.fixture
async def meta(config: JobConfig) -> AsyncIterator[System]:
    system = open_system(config.system(config.metadata_system))
    await system.start()
    try:
        yield system
    finally:
        await system.close()


def _facts(state: CoordinatorState) -> tuple[object, ...]:
    return (state.model, {w: r.to_dict() for w, r in state.workers.items()},
            state.status.to_dict(), {h: r.to_dict() for h, r in state.hosts.items()},
            {w: p.to_dict() for w, p in state.progress.items()})


def _model(epoch: int) -> JobModel:
    return JobModel(job="j", epoch=epoch, config_digest="d", workers=1, tasks={})


async def test_a_reader_follows_every_write_and_agrees_with_a_full_replay(
        config: JobConfig, meta: System) -> None:
    reader = CoordinatorReader(meta, config)
    try:
        assert await reader.latest_model() is None  # no coordinator stream yet
        for epoch in range(1, 4):
            published = await publish_model(meta, config, _model(epoch))
            for worker in range(3):
                await publish_worker_report(meta, config, worker, WorkerReport(
                    epoch=published.epoch, pid=100 * epoch + worker, started_ms=epoch))
            followed = await reader.read()
            assert followed.model == published
            assert {w: r.pid for w, r in followed.workers.items()} == {
                w: 100 * epoch + w for w in range(3)}
            assert _facts(followed) == _facts(await read_state(meta, config))
            assert await reader.latest_model() is followed.model  # decoded once, kept
        # What a caller changes in a state it was given is not the reader's next answer.
        followed.workers.clear()
        assert set((await reader.read()).workers) == {0, 1, 2}
    finally:
        await reader.close()


async def test_a_new_reader_starts_from_the_beginning_and_a_closed_one_opens_again(
        config: JobConfig, meta: System) -> None:
    published = await publish_model(meta, config, _model(1))
    reader = CoordinatorReader(meta, config)
    assert await reader.latest_model() == published
    await reader.close()
    newer = await publish_model(meta, config, _model(2))
    assert await reader.latest_model() == newer  # a read after close opens a consumer
    await reader.close()


async def test_first_state_is_the_stream_at_the_first_moment_a_condition_held(
        config: JobConfig, meta: System) -> None:
    """Replayed record by record: the state when worker 0 first reported epoch 2 — its
    pid then, the model of that moment — not the latest, which moved on to epoch 3."""
    assert await first_state(meta, config, lambda s: True) is None  # no stream yet
    for epoch in range(1, 4):
        await publish_model(meta, config, _model(epoch))
        for worker in range(2):
            await publish_worker_report(meta, config, worker, WorkerReport(
                epoch=epoch, pid=100 * epoch + worker, started_ms=epoch))
    found = await first_state(meta, config, lambda s: 0 in s.workers and (
        s.workers[0].epoch == 2))
    assert found is not None and found.model == _model(2)
    assert {w: r.pid for w, r in found.workers.items()} == {0: 200, 1: 101}  # 1 not yet
    assert await first_state(meta, config, lambda s: 0 in s.workers and (
        s.workers[0].epoch == 4)) is None  # never
    assert _facts(await first_state(meta, config, lambda s: s.workers.get(1) is not None and (
        s.workers[1].epoch == 3))) == _facts(await read_state(meta, config))  # the last
