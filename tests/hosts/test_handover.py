"""Incremental rebalancing, the pure part: which tasks a first model parks, what its
follow-up waits for, and a placement that leaves staying workers' tasks alone."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from framework.hosts.handover import first_model, pending_releases
from framework.hosts.member import Member
from framework.hosts.placement import RUNNING, place_on_hosts, restore_gaps, worker_ids
from framework.metadata import HostReport, WorkerReport
from framework.metadata.jobmodel import PARKED, JobModel, TaskModel
from groupers import SystemStreamPartition


def member(host: str, workers: int = 2, positions: dict[str, dict[str, tuple[int, int]]]
           | None = None) -> Member:
    return Member(host, workers, 1, "m", 0, positions or {})


def placed(epoch: int, hosts: dict[str, tuple[int, ...]], workers: dict[str, int],
           standbys: dict[str, tuple[str, ...]] | None = None) -> JobModel:
    """Tasks ``Partition i`` on the given workers of ``hosts``."""
    tasks = {name: TaskModel(name, frozenset({SystemStreamPartition(
        "kafka", "in", int(name.split()[1]))}), int(name.split()[1]), worker)
        for name, worker in workers.items()}
    return JobModel("job", epoch, "d", max(w for ids in hosts.values() for w in ids) + 1,
                    tasks, {"kafka.in": len(tasks)}, hosts=hosts, standbys=standbys or {})


A_B = {"a": (0, 1), "b": (2, 3)}
BEFORE = placed(1, A_B, {"Partition 0": 0, "Partition 1": 1, "Partition 2": 2,
                         "Partition 3": 3})


def test_a_task_moving_between_members_is_parked_and_its_copies_there_dropped() -> None:
    target = placed(2, {**A_B, "c": (4, 5)},
                    {"Partition 0": 0, "Partition 1": 4, "Partition 2": 2, "Partition 3": 5},
                    standbys={"Partition 1": ("a", "c", "b"), "Partition 2": ("c",)})
    first = first_model(BEFORE, target, {"a", "b", "c"})
    assert first is not None
    assert first.parked == {"Partition 1": "a", "Partition 3": "b"}
    assert {t.name: t.worker for t in first.tasks.values()} == {
        "Partition 0": 0, "Partition 1": PARKED, "Partition 2": 2, "Partition 3": PARKED}
    assert first.host_of("Partition 1") is None
    assert dict(first.standbys) == {"Partition 1": ("b",), "Partition 2": ("c",)}
    assert first.hosts == target.hosts and first.epoch == target.epoch


def test_tasks_of_a_host_that_left_are_placed_at_once() -> None:
    target = placed(2, {"a": (0, 1)}, {"Partition 0": 0, "Partition 1": 1,
                                       "Partition 2": 0, "Partition 3": 1})
    assert first_model(BEFORE, target, {"a"}) is None
    assert first_model(None, target, {"a"}) is None


def test_a_task_parked_before_is_parked_again_while_its_host_is_a_member() -> None:
    parked = replace(BEFORE, tasks={**BEFORE.tasks, "Partition 3": replace(
        BEFORE.tasks["Partition 3"], worker=PARKED)}, parked={"Partition 3": "b"})
    target = placed(3, {**A_B, "c": (4, 5)}, {"Partition 0": 0, "Partition 1": 1,
                                              "Partition 2": 2, "Partition 3": 4})
    first = first_model(parked, target, {"a", "b", "c"})
    assert first is not None and first.parked == {"Partition 3": "b"}
    back = placed(3, A_B, {"Partition 0": 0, "Partition 1": 1, "Partition 2": 2,
                           "Partition 3": 3})  # placed back on its host: not a move
    assert first_model(parked, back, {"a", "b"}) is None


def _report(epoch: int, resumed: bool = True) -> WorkerReport:
    return WorkerReport(epoch=epoch, pid=1, started_ms=1, resumed_ms=5 if resumed else None)


def test_the_follow_up_waits_for_every_host_and_the_releasing_hosts_workers() -> None:
    target = placed(2, {**A_B, "c": (4, 5)}, {"Partition 0": 0, "Partition 1": 4,
                                              "Partition 2": 2, "Partition 3": 3})
    first = first_model(BEFORE, target, {"a", "b", "c"})
    assert first is not None and first.parked == {"Partition 1": "a"}
    hosts = {h: HostReport(host=h, pid=1, machine="m", epoch=2) for h in "abc"}
    workers = {w: _report(2) for w in (0, 1, 2, 3, 4, 5)}
    assert pending_releases(first, workers, hosts) == []
    assert pending_releases(first, {**workers, 1: _report(1)}, hosts) == [
        "worker 1 of host a"]
    assert pending_releases(first, {**workers, 0: _report(2, resumed=False)}, hosts) == [
        "worker 0 of host a"]
    assert pending_releases(first, {**workers, 2: _report(1)}, hosts) == []  # b keeps its
    assert pending_releases(first, workers, {**hosts, "c": replace(hosts["c"], epoch=1)}) == [
        "host c"]


def test_hosts_keep_their_worker_ids_and_new_ones_take_the_lowest_free() -> None:
    """Free: no host has it now, none had it in the previous model."""
    assert worker_ids({"a": member("a"), "b": member("b")}, None) == A_B
    assert worker_ids({"b": member("b"), "c": member("c", 3)}, BEFORE) == {
        "b": (2, 3), "c": (4, 5, 6)}  # a's ids stay free while a may come back
    assert worker_ids({"a": member("a", 3), "b": member("b")}, BEFORE) == {
        "a": (4, 5, 6), "b": (2, 3)}
    without_a = placed(2, {"b": (2, 3), "c": (4, 5, 6)}, {"Partition 0": 2})
    assert worker_ids({"a": member("a"), "b": member("b"), "c": member("c", 3)},
                      without_a) == {"a": (0, 1), "b": (2, 3), "c": (4, 5, 6)}


def test_a_host_joining_changes_nothing_for_workers_whose_tasks_stay() -> None:
    changelogs = {f"Partition {p}": p for p in range(8)}
    ranges = {t: {"s": (0, 0)} for t in changelogs}
    members = {"a": member("a"), "b": member("b")}
    first = place_on_hosts(members, changelogs, None, ranges, stateful=False, standbys=0,
                           acceptable_recovery_lag=0, max_warmups=0)
    model = placed(1, first.hosts, first.workers)
    second = place_on_hosts({**members, "c": member("c")}, changelogs, model, ranges,
                            stateful=False, standbys=0, acceptable_recovery_lag=0,
                            max_warmups=0)
    assert {h: second.hosts[h] for h in "ab"} == first.hosts
    stayed = [t for t in changelogs if model.host_of(t) == placed(
        2, second.hosts, second.workers).host_of(t)]
    assert len(stayed) >= 4
    assert all(second.workers[t] == first.workers[t] for t in stayed)
    assert sorted(list(second.workers.values()).count(w) for w in range(6)) == [1, 1, 1, 1,
                                                                                2, 2]


def test_a_running_tasks_copy_counts_as_current() -> None:
    ranges = {"Partition 0": {"s": (10, 500)}}
    running = member("a", positions={"Partition 0": {"s": (0, RUNNING)}})
    assert restore_gaps(running, {"Partition 0": 0}, ranges) == {"Partition 0": 0}
    elsewhere = member("a", positions={"Partition 0": {"s": (1, RUNNING)}})
    assert restore_gaps(elsewhere, {"Partition 0": 0}, ranges) == {}


@given(st.lists(st.sampled_from("abcd"), min_size=8, max_size=8),
       st.lists(st.sampled_from("abcd"), min_size=8, max_size=8),
       st.sets(st.sampled_from("abcd"), min_size=1))
def test_a_first_model_runs_no_task_on_a_host_it_did_not_run_on(
        before: list[str], after: list[str], members: set[str]) -> None:
    """Property: in a first model every task runs where it ran before, runs where its
    previous host is gone, or is parked by the member that still runs it."""
    ids = {h: (i,) for i, h in enumerate("abcd")}
    previous = placed(1, ids, {f"Partition {p}": ids[h][0] for p, h in enumerate(before)})
    target = placed(2, ids, {f"Partition {p}": ids[h][0] for p, h in enumerate(after)})
    first = first_model(previous, target, members) or target
    for name in target.tasks:
        was, now = previous.host_of(name), first.host_of(name)
        if was in members:
            assert now in (was, None)
            assert (now is None) == (name in first.parked) == (
                target.host_of(name) != was)
            assert first.parked.get(name, was) == was
        else:
            assert now == target.host_of(name) and name not in first.parked
