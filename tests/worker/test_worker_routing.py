"""`framework.worker.routing.Routing` alone, with fake task instances and consumers: which
task reads which partition, expansion barriers, and held inputs read up to their limit."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from framework.metadata.jobmodel import BarrierStage, JobModel, StreamHold, TaskModel
from framework.systems.base import FetchedRecord, System
from framework.worker.instance import TaskInstance
from framework.worker.routing import Routing
from groupers import SystemStreamPartition


def ssp(partition: int) -> SystemStreamPartition:
    return SystemStreamPartition("local", "words", partition)


@dataclass
class FakeInstance:
    """What routing reads of a task instance."""

    name: str
    ssps: frozenset[SystemStreamPartition]
    positions: dict[SystemStreamPartition, int]
    caught_up: dict[SystemStreamPartition, float] = field(default_factory=dict)


class FakeConsumer:
    def __init__(self) -> None:
        self.assigned: dict[SystemStreamPartition, int] = {}
        self.counts: dict[str, int] = {}

    def assign(self, positions: Mapping[SystemStreamPartition, int]) -> None:
        self.assigned = dict(positions)

    def expect_partition_counts(self, counts: Mapping[str, int]) -> None:
        self.counts = dict(counts)


class FakeSystem:
    def __init__(self) -> None:
        self.consumers: list[FakeConsumer] = []

    def consumer(self) -> FakeConsumer:
        self.consumers.append(FakeConsumer())
        return self.consumers[-1]


@dataclass(frozen=True)
class Rec:
    offset: int


def task(name: str, positions: dict[int, int]) -> FakeInstance:
    return FakeInstance(name, frozenset(ssp(p) for p in positions),
                        {ssp(p): o for p, o in positions.items()})


def routing() -> tuple[Routing, FakeSystem]:
    system = FakeSystem()
    return Routing(cast(dict[str, System], {"local": system})), system


def tasks(*instances: FakeInstance) -> list[TaskInstance]:
    return cast(list[TaskInstance], list(instances))


def assigned(system: FakeSystem) -> dict[SystemStreamPartition, int]:
    assert len(system.consumers) == 1  # one consumer per system, made once
    return system.consumers[0].assigned


def test_each_partition_goes_to_its_readers_from_the_slowest_position() -> None:
    routes, system = routing()
    one, two = task("a", {0: 5, 1: 7}), task("b", {1: 3})
    routes.route(tasks(one, two), None)
    assert {s: [r.name for r in rs] for s, rs in routes.routes.items()} == {
        ssp(0): ["a"], ssp(1): ["a", "b"]}
    assert assigned(system) == {ssp(0): 5, ssp(1): 3}
    assert one.caught_up is routes.caught_up and two.caught_up is routes.caught_up


def test_a_partition_behind_a_barrier_is_read_once_the_older_ones_reach_it(
        caplog: pytest.LogCaptureFixture) -> None:
    routes, system = routing()
    one = task("a", {0: 5, 2: 0})
    routes.set_stages("a", [BarrierStage({ssp(0): 10}, frozenset({ssp(2)}))])
    routes.route(tasks(one), None)
    assert assigned(system) == {ssp(0): 5}
    assert not routes.release_barriers(tasks(one), None)
    one.positions[ssp(0)] = 10
    with caplog.at_level(logging.INFO, "framework.worker.routing"):
        assert routes.release_barriers(tasks(one), None)
    assert assigned(system) == {ssp(0): 10, ssp(2): 0}
    assert routes.stages == {}
    assert "task a passed its expansion barrier; consuming 1 new partition" in caplog.text


def test_barrier_stages_are_released_in_order() -> None:
    routes, system = routing()
    one = task("a", {0: 10, 1: 0, 2: 0})
    routes.set_stages("a", [BarrierStage({ssp(0): 10}, frozenset({ssp(1)})),
                            BarrierStage({ssp(1): 4}, frozenset({ssp(2)}))])
    routes.route(tasks(one), None)
    assert assigned(system) == {ssp(0): 10}
    assert routes.release_barriers(tasks(one), None)
    assert assigned(system) == {ssp(0): 10, ssp(1): 0}  # the second waits for partition 1
    one.positions[ssp(1)] = 4
    assert routes.release_barriers(tasks(one), None)
    assert assigned(system) == {ssp(0): 10, ssp(1): 4, ssp(2): 0}


def test_a_held_partition_is_read_up_to_its_limit_then_unassigned() -> None:
    routes, system = routing()
    one = task("a", {0: 0, 1: 0})
    routes.set_limits({ssp(0): 3})
    routes.route(tasks(one), None)
    assert routes.approaching == {ssp(0)} and not routes.limits_reached()
    batch = [Rec(o) for o in range(5)]
    kept = routes.below_limit(ssp(0), cast(list[FetchedRecord], batch))
    assert list(kept) == [Rec(0), Rec(1), Rec(2)]
    assert routes.at_limit == {ssp(0)} and routes.limits_reached()
    routes.route(tasks(one), None)
    assert assigned(system) == {ssp(1): 0} and routes.approaching == set()


def test_records_before_the_limit_pass_untouched() -> None:
    routes, _ = routing()
    routes.set_limits({ssp(0): 10})
    batch = cast(list[FetchedRecord], [Rec(7), Rec(8)])
    assert routes.below_limit(ssp(0), batch) is batch
    assert routes.at_limit == set()


def test_a_limit_moved_further_reads_the_partition_again() -> None:
    routes, system = routing()
    one = task("a", {0: 2})
    routes.set_limits({ssp(0): 3})
    routes.route(tasks(one), None)
    routes.below_limit(ssp(0), cast(list[FetchedRecord], [Rec(2), Rec(3)]))
    one.positions[ssp(0)] = 3
    routes.route(tasks(one), None)
    assert assigned(system) == {}
    routes.set_limits({ssp(0): 6})
    routes.route(tasks(one), None)
    assert assigned(system) == {ssp(0): 3}


def test_consumers_expect_the_models_counts_except_where_a_hold_is_not_exact() -> None:
    routes, system = routing()
    model = JobModel("job", 1, "d", 1, {"a": TaskModel("a", frozenset({ssp(0)}), 0, 0)},
                     {"local.words": 2, "local.clicks": 4},
                     holds={"local.clicks": StreamHold(4, {0: 9}, exact=False, refused=6)})
    routes.route(tasks(task("a", {0: 0})), model)
    assert system.consumers[0].counts == {"words": 2}


def test_caught_up_partitions_are_noted_and_forgotten_once_read_again() -> None:
    routes, _ = routing()
    routes.route(tasks(task("a", {0: 0, 1: 0})), None)
    batch: dict[SystemStreamPartition, Any] = {ssp(0): [Rec(0)]}
    routes.note_caught_up("local", batch)
    assert set(routes.caught_up) == {ssp(1)}
    routes.note_caught_up("local", {ssp(1): [Rec(0)]})
    assert set(routes.caught_up) == {ssp(0)}
