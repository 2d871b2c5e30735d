"""A partition change costs one model build and one checkpoint read, on every path that
publishes one: the one-host coordinator (in place or with a restart, an expansion or a
hold) and the leader of several hosts (in place, or in a rebalance's round).

Builds are counted where every build starts (the builder asks for the job's grouper once
per build, refused or not); checkpoint reads at the system. Before the model service a
change cost up to three builds (the holds' and the decision's test builds) and, with a
Kafka hold, two checkpoint reads. On the real local log (and a real Kafka broker for the
hold Kafka cannot record exactly); no worker processes: the coordinator's steps are run
one by one.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from jobs.jobfiles import COUNT_TASK, count_job_text
from jobs.runs import KafkaSumJob

import framework.coordinator.builder as builder
from framework.config import JobConfig, load_config
from framework.coordinator.model_service import ModelService
from framework.coordinator.process import Coordinator
from framework.hosts import leader
from framework.hosts.member import Member
from framework.metadata.jobmodel import JobModel
from framework.systems.kafka.system import KafkaSystem
from framework.systems.local.system import LocalSystem

WORDS = "local.words"


@dataclass
class Cost:
    builds: int = 0
    reads: int = 0

    def reset(self) -> None:
        self.builds = self.reads = 0


@pytest.fixture
def cost(monkeypatch: pytest.MonkeyPatch) -> Iterator[Cost]:
    """Counts model builds and checkpoint reads from the moment `Cost.reset` is called."""
    counted = Cost()
    make_grouper = builder.make_grouper

    def grouper(config: JobConfig) -> Any:
        counted.builds += 1
        return make_grouper(config)

    monkeypatch.setattr(builder, "make_grouper", grouper)
    for system in (LocalSystem, KafkaSystem):
        read = system.read_checkpoints

        async def reading(self: Any, job: str, read: Any = read) -> Any:
            counted.reads += 1
            return await read(self, job)

        monkeypatch.setattr(system, "read_checkpoints", reading)
    yield counted


def _config(folder: Path, model_changes: str = "in-place") -> JobConfig:
    folder.mkdir()
    shutil.copy(COUNT_TASK, folder / "count_task.py")
    (folder / "job.toml").write_text(count_job_text("builds", {"words": 2},
                                              model_changes=model_changes))
    return load_config(folder / "job.toml")


@asynccontextmanager
async def one_host(config: JobConfig) -> AsyncIterator[Coordinator]:
    """A coordinator that published its first model (no workers), its systems open."""
    coordinator = Coordinator(config, start_workers=False)
    await coordinator.open_systems()
    try:
        counts = await coordinator.partition_counts()
        await coordinator.create_declared_streams()
        coordinator.model = await coordinator._start_model(counts, None)
        yield coordinator
    finally:
        await coordinator.close_systems()


@pytest.mark.parametrize(("model_changes", "grown", "reason", "counts", "held"), [
    ("in-place", 4, "expansion local.words 2→4", 4, False),
    ("in-place", 3, "hold local.words", 2, True),
    ("restart", 4, "expansion local.words 2→4", 4, False),
    ("restart", 3, "hold local.words", 2, True),
])
async def test_a_change_on_one_host_is_one_build_and_one_checkpoint_read(
        tmp_path: Path, cost: Cost, model_changes: str, grown: int, reason: str,
        counts: int, held: bool) -> None:
    async with one_host(_config(tmp_path / "job", model_changes)) as coordinator:
        await coordinator.systems["local"].expand_stream("words", grown)
        now = await coordinator.partition_counts()
        cost.reset()
        await coordinator._on_change(now)
        assert (cost.builds, cost.reads) == (1, 1)
        model = coordinator.model
        assert model is not None and model.epoch == 2 and model.reason == reason
        assert (model.partition_counts[WORDS], WORDS in model.holds) == (counts, held)
        cost.reset()
        await coordinator._on_change(await coordinator.partition_counts())  # the next pass
        assert (cost.builds, cost.reads) == (0, 0)
        assert coordinator.model is model


async def _leader_running(config: JobConfig, service: ModelService) -> JobModel:
    return (await leader.lead(service, {"a": Member("a", 2, 1, "m", 1)}, "hosts a")).model


@pytest.mark.parametrize(("grown", "reason", "counts", "held"), [
    (4, "expansion local.words 2→4 (in place, hosts a)", 4, False),
    (3, "hold local.words (in place, hosts a)", 2, True),
])
async def test_a_change_the_leader_applies_in_place_is_one_build_and_one_checkpoint_read(
        tmp_path: Path, cost: Cost, grown: int, reason: str, counts: int,
        held: bool) -> None:
    service = ModelService(_config(tmp_path / "job"))
    await service.open()
    try:
        running = await _leader_running(service.config, service)
        await service.systems["local"].expand_stream("words", grown)
        cost.reset()
        model = await leader.change_in_place(service, running)
        assert (cost.builds, cost.reads) == (1, 1)
        assert model is not None and model.epoch == running.epoch + 1
        assert model.reason == reason and model.in_place_since == running.epoch
        assert (model.partition_counts[WORDS], WORDS in model.holds) == (counts, held)
    finally:
        await service.close()


async def test_a_change_applied_by_a_rebalance_is_one_build_and_one_checkpoint_read(
        tmp_path: Path, cost: Cost) -> None:
    """The round's model places tasks over hosts from their restore ranges, which need the
    new tasks' changelog partitions: found inside the one build, no draft build first."""
    service = ModelService(_config(tmp_path / "job"))
    await service.open()
    try:
        running = await _leader_running(service.config, service)
        await service.systems["local"].expand_stream("words", 4)
        cost.reset()
        led = await leader.lead(service, {"a": Member("a", 2, 1, "m", 1),
                                          "b": Member("b", 2, 2, "m", 2)}, "hosts a, b")
        assert (cost.builds, cost.reads) == (1, 1)
        assert led.model.epoch == running.epoch + 1
        assert led.model.reason.startswith("hosts a, b, expansion local.words 2→4")
        assert led.model.partition_counts[WORDS] == 4
    finally:
        await service.close()


async def test_a_kafka_hold_is_one_build_then_a_checkpoint_read_per_pass_and_no_build(
        kafka_broker: Any, tmp_path: Path, cost: Cost) -> None:
    """On Kafka the hold is where the change was seen, raised to where the workers' last
    checkpoints say they read — from the change's one read; every later pass reads the
    checkpoints once to count the records past the hold, and builds nothing."""
    job = KafkaSumJob(tmp_path / "job", kafka_broker.bootstrap, f"builds-{tmp_path.name}")
    async with one_host(job.config) as coordinator:
        await coordinator.systems["kafka"].expand_stream(job.events, 3)
        now = await coordinator.partition_counts()
        cost.reset()
        await coordinator._on_change(now)
        assert (cost.builds, cost.reads) == (1, 1)
        model = coordinator.model
        assert model is not None and model.reason == f"hold kafka.{job.events}"
        assert not model.holds[f"kafka.{job.events}"].exact
        cost.reset()
        await coordinator._on_change(await coordinator.partition_counts())
        assert (cost.builds, cost.reads) == (0, 1)
        assert coordinator.model is model
