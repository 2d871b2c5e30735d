"""A leader whose model was built on an epoch that stopped being current before it
published (another leader's round overlapped) builds it again on the newer model and
publishes it in place — it does not publish a stale model that restarts every worker; an
in-place change overtaken the same way is left to a rebalance; a host stopped inside a
round starts no worker for the round's model. On the local log."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest
from jobs.jobfiles import write_job

from framework.config import JobConfig, load_config
from framework.coordinator.model_service import ModelBasis, ModelChange, ModelService
from framework.hosts import leader
from framework.hosts.host import Host
from framework.hosts.member import Member
from framework.metadata import publish_model, read_state
from framework.metadata.jobmodel import JobModel
from framework.systems import open_system


def _config(tmp_path: Path) -> JobConfig:
    return load_config(write_job(tmp_path / "job", name="rebuild"))


def _members(*hosts: str) -> dict[str, Member]:
    return {host: Member(host, 1, 1, "m", index, {}) for index, host in enumerate(hosts)}


async def _with_service(config: JobConfig, step: str, *args: object) -> object:
    """``leader.<step>(service, *args)`` over a model service of its own."""
    service = ModelService(config)
    await service.open()
    try:
        return await getattr(leader, step)(service, *args)
    finally:
        await service.close()


def _lead(config: JobConfig, members: Mapping[str, Member], reason: str) -> leader.Led:
    led = asyncio.run(_with_service(config, "lead", members, reason))
    assert isinstance(led, leader.Led)
    return led


def _change_in_place(config: JobConfig, running: JobModel) -> JobModel | None:
    model = asyncio.run(_with_service(config, "change_in_place", running))
    assert model is None or isinstance(model, JobModel)
    return model


BASIS = ModelService.basis


def _meanwhile(then: object) -> object:
    """`ModelService.basis` followed by ``then()`` (awaited): what lands while the leader
    builds, after it read the job's state and before it checks the fence again."""
    async def basis(self: ModelService, previous: JobModel | None,
                    change: ModelChange | None = None) -> ModelBasis:
        found = await BASIS(self, previous, change)
        await then()  # type: ignore[operator]
        return found
    return basis


async def _publish_next(config: JobConfig, reason: str) -> JobModel:
    """Another leader's model: the current one, moved on an epoch, taken in place."""
    meta = open_system(config.system(config.metadata_system))
    await meta.start()
    try:
        current = (await read_state(meta, config)).model
        assert current is not None
        return await publish_model(meta, config, replace(current, epoch=current.epoch + 1,
                                                         reason=reason),
                                   previous=current, in_place=True)
    finally:
        await meta.close()


def test_a_model_built_on_an_epoch_no_longer_current_is_built_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(tmp_path)
    first = _lead(config, _members("a", "b"), "hosts a, b").model
    assert first.epoch == 1 and first.in_place_since is None

    overlapping: list[JobModel] = []

    async def published_meanwhile() -> None:
        """While the leader builds, the other leader's model lands (once)."""
        if not overlapping:
            overlapping.append(await _publish_next(config, "the other leader's round"))

    monkeypatch.setattr(ModelService, "basis", _meanwhile(published_meanwhile))
    led = _lead(config, _members("a"), "hosts a")
    other = overlapping[0]
    assert other.epoch == 2 and other.in_place_since == 1
    # built again on epoch 2: the next epoch, taken in place by epoch 2's workers
    assert led.model.epoch == 3
    assert led.model.in_place_since == 1
    assert set(led.model.hosts) == {"a"}


def test_a_leader_waits_for_the_model_of_an_epoch_already_fenced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another leader fenced epoch 2 and writes its model a moment later: the leader reads
    again until it is there and builds on it (the wait ends when the model is readable;
    its bound is raised so that a stalled machine cannot end it first)."""
    monkeypatch.setattr(leader, "FENCE_WAIT_S", 60.0)
    config = _config(tmp_path)
    _lead(config, _members("a", "b"), "hosts a, b")

    async def overlap() -> tuple[JobModel, JobModel]:
        meta = open_system(config.system(config.metadata_system))
        await meta.start()
        try:
            current = (await read_state(meta, config)).model
            assert current is not None
            await meta.advance_fence(config.name, 2, in_place=True)

            async def write_late() -> JobModel:
                await asyncio.sleep(0.5)
                return await publish_model(meta, config, replace(
                    current, epoch=2, in_place_since=1, reason="the other leader's round"),
                    fenced=True)

            other, led = await asyncio.gather(
                write_late(), _with_service(config, "lead", _members("a"), "hosts a"))
            assert isinstance(led, leader.Led)
            return other, led.model
        finally:
            await meta.close()

    other, model = asyncio.run(overlap())
    assert other.epoch == 2
    assert model.epoch == 3 and model.in_place_since == 1  # built on epoch 2, in place


def test_an_epoch_fenced_by_a_leader_that_died_before_its_model_is_built_over_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fence with no model behind it (its leader died between the two writes): after
    `FENCE_WAIT_S` the leader builds on the last model it can read, once, and publishes
    past the fence (for a restart: that leader's workers may have been fenced)."""
    config = _config(tmp_path)
    _lead(config, _members("a", "b"), "hosts a, b")

    async def fence() -> None:
        meta = open_system(config.system(config.metadata_system))
        await meta.start()
        try:
            await meta.advance_fence(config.name, 2, in_place=True)
        finally:
            await meta.close()

    asyncio.run(fence())
    monkeypatch.setattr(leader, "FENCE_WAIT_S", 0.3)
    builds: list[int] = []

    async def counted() -> None:
        builds.append(1)

    monkeypatch.setattr(ModelService, "basis", _meanwhile(counted))
    model = _lead(config, _members("a"), "hosts a").model
    assert len(builds) == 1
    assert model.epoch == 3 and model.in_place_since is None


def test_without_the_rebuild_the_stale_model_restarts_every_worker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The last build publishes whatever the fence says (for a restart): what happens to
    every build when another model lands before each publish."""
    config = _config(tmp_path)
    _lead(config, _members("a", "b"), "hosts a, b")
    async def always_overtaken() -> None:
        await _publish_next(config, "another leader's round")

    monkeypatch.setattr(ModelService, "basis", _meanwhile(always_overtaken))
    led = _lead(config, _members("a"), "hosts a")
    assert led.model.epoch == 1 + leader.STALE_BUILDS + 1  # one more model per build
    assert led.model.in_place_since is None  # fenced past its previous: a restart


def test_a_host_stopped_inside_a_round_starts_no_worker_for_its_model(
        tmp_path: Path) -> None:
    config = _config(tmp_path)
    model = _lead(config, _members("a"), "hosts a").model
    host = Host(config, "a")
    started: list[object] = []

    async def start_ids(ids: object) -> None:
        started.append(ids)

    host.supervisor.start_ids = start_ids  # type: ignore[method-assign]
    host.stop.set()
    asyncio.run(host._run_model(model, False))
    assert started == [] and host.model is None


def test_an_in_place_change_overtaken_by_another_model_is_left_to_a_rebalance(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The leader applying an expansion in place publishes nothing when another model
    became current while it built the change (None: a rebalance applies it) — a model over
    the newer one would restart every worker."""
    config = _config(tmp_path)
    running = _lead(config, _members("a"), "hosts a").model

    async def grow() -> None:
        meta = open_system(config.system(config.metadata_system))
        await meta.start()
        try:
            await meta.expand_stream("events", 2 * running.partition_counts["local.events"])
        finally:
            await meta.close()

    asyncio.run(grow())

    async def published_meanwhile() -> None:
        await _publish_next(config, "another leader's round")

    monkeypatch.setattr(ModelService, "basis", _meanwhile(published_meanwhile))
    assert _change_in_place(config, running) is None
    monkeypatch.setattr(ModelService, "basis", BASIS)
    current = _change_in_place(config, replace(running, epoch=2))
    assert current is not None and current.epoch == 3  # not overtaken: applied in place
    assert current.in_place_since == 1
    assert current.partition_counts["local.events"] == 2 * running.partition_counts[
        "local.events"]
