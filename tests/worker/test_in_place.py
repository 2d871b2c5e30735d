"""Which newer job models a running worker takes in place (`framework.worker.in_place`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from framework.metadata.jobmodel import JobModel, StreamHold, TaskModel
from framework.worker.in_place import InPlaceChange, in_place_change
from groupers import SystemStreamPartition


def ssp(partition: int, stream: str = "words") -> SystemStreamPartition:
    return SystemStreamPartition("local", stream, partition)


def model(epoch: int, count: int, *, since: int | None = None, workers: int = 2,
          digest: str = "d1", swap: bool = False) -> JobModel:
    """Two fixed tasks over ``count`` partitions (p % 2), task i on worker i (or swapped)."""
    tasks = {f"Partition {t}": TaskModel(
        f"Partition {t}", frozenset(ssp(p) for p in range(count) if p % 2 == t), t,
        (1 - t) if swap else t) for t in (0, 1)}
    return JobModel("job", epoch, digest, workers, tasks, {"local.words": count},
                    in_place_since=since)


def test_an_expansion_published_in_place_is_taken_with_the_gained_partitions() -> None:
    change = in_place_change(model(1, 2), model(2, 4, since=1), 1, "d1")
    assert isinstance(change, InPlaceChange)
    assert change.model.epoch == 2
    assert change.gained == {"Partition 1": frozenset({ssp(3)})}


def test_a_worker_two_in_place_epochs_behind_takes_the_latest() -> None:
    change = in_place_change(model(2, 4, since=1), model(4, 8, since=1), 0, "d1")
    assert isinstance(change, InPlaceChange)
    assert change.gained == {"Partition 0": frozenset({ssp(4), ssp(6)})}


def test_the_same_tasks_again_are_taken_with_nothing_gained() -> None:
    change = in_place_change(model(1, 2), model(2, 2, since=1), 0, "d1")
    assert isinstance(change, InPlaceChange) and change.gained == {}


@pytest.mark.parametrize(("current", "latest", "why"), [
    (model(2, 4), model(2, 4), "no newer job model"),
    (model(1, 2), model(2, 4), "epoch 2 was published for workers to restart on"),
    (model(1, 2), model(3, 4, since=2),
     "epoch 3 may be taken in place from epoch 2 on, not from epoch 1"),
    (model(1, 2), model(2, 4, since=1, digest="d2"), "another version of the job file"),
    (model(1, 2), model(2, 4, since=1, workers=3), "epoch 2 runs 3 workers, not 2"),
    (model(1, 2), model(2, 4, since=1, swap=True),
     "moves tasks Partition 0, Partition 1 to or from this worker"),
])
def test_what_is_not_taken_in_place_says_why(current: JobModel, latest: JobModel,
                                              why: str) -> None:
    change = in_place_change(current, latest, 0, "d1")
    assert isinstance(change, str) and why in change


def test_a_hold_placed_or_released_is_taken_in_place() -> None:
    """A hold changes only where reads stop: placed at the same count (nothing gained),
    released on a count the tasks map (the tasks gain the new partitions)."""
    hold = {"local.words": StreamHold(4, {0: 5, 1: 5, 2: 5, 3: 5}, True, 5)}
    placed = in_place_change(model(1, 4), replace(model(2, 4, since=1), holds=hold), 0, "d1")
    assert isinstance(placed, InPlaceChange) and placed.gained == {}
    assert placed.model.read_limits()[ssp(0)] == 5
    released = in_place_change(replace(model(2, 4, since=1), holds=hold), model(3, 8, since=1),
                               0, "d1")
    assert isinstance(released, InPlaceChange)
    assert released.gained == {"Partition 0": frozenset({ssp(4), ssp(6)})}
    assert released.model.read_limits() == {}


def test_a_worker_id_moved_to_another_host_is_not_taken_in_place() -> None:
    current = replace(model(1, 2), hosts={"a": (0,), "b": (1,)})
    same = replace(model(2, 4, since=1), hosts={"a": (0,), "b": (1,)})
    swapped = replace(model(2, 4, since=1), hosts={"a": (1,), "b": (0,)})
    assert isinstance(in_place_change(current, same, 0, "d1"), InPlaceChange)
    assert in_place_change(current, swapped, 0, "d1") == (
        "epoch 2 runs worker 0 on another host")


def test_a_task_losing_a_partition_is_not_taken_in_place() -> None:
    latest = model(2, 4, since=1)
    shrunk = replace(latest.tasks["Partition 0"], ssps=frozenset({ssp(2)}))
    latest = replace(latest, tasks={**latest.tasks, "Partition 0": shrunk})
    change = in_place_change(model(1, 4), latest, 0, "d1")
    assert change == "epoch 2 changes task Partition 0 beyond adding partitions"


def test_a_model_survives_its_bytes_with_in_place_since() -> None:
    published = model(3, 8, since=1)
    assert JobModel.from_bytes(published.to_bytes()) == published
    assert b"in_place_since" not in model(1, 2).to_bytes()  # restart models: as before


def test_with_several_hosts_a_worker_lets_tasks_go_and_takes_tasks_in_place() -> None:
    """An incremental rebalance parks a task (its worker lets it go) and the follow-up
    places it on another worker (which adds it); a host may add workers meanwhile."""
    hosts = {"a": (0,), "b": (1,)}
    current = replace(model(1, 2), hosts=hosts)
    parked = replace(model(2, 2, since=1), hosts={**hosts, "c": (2,)}, workers=3)
    parked = replace(parked, tasks={**parked.tasks, "Partition 1": replace(
        parked.tasks["Partition 1"], worker=-1)}, parked={"Partition 1": "b"})
    let_go = in_place_change(current, parked, 1, "d1")
    assert isinstance(let_go, InPlaceChange)
    assert (let_go.dropped, let_go.added, let_go.gained) == (("Partition 1",), (), {})
    kept = in_place_change(current, parked, 0, "d1")
    assert isinstance(kept, InPlaceChange) and (kept.dropped, kept.added) == ((), ())
    placed = replace(parked, epoch=3, parked={}, tasks={**parked.tasks, "Partition 1": replace(
        parked.tasks["Partition 1"], worker=2)})
    added = in_place_change(parked, placed, 2, "d1")
    assert isinstance(added, InPlaceChange)
    assert (added.dropped, added.added) == ((), ("Partition 1",))


def test_one_host_never_moves_tasks_between_workers_in_place() -> None:
    change = in_place_change(model(1, 2), model(2, 2, since=1, swap=True), 0, "d1")
    assert change == "epoch 2 moves tasks Partition 0, Partition 1 to or from this worker"
