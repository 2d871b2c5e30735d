"""A host's report through the models of incremental rebalances, without a broker: what it
says moved, and the restores it names for those tasks."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from test_handover import placed

from framework.hosts import reporting
from framework.hosts.reporting import HostReporter
from framework.metadata import WorkerReport
from framework.metadata.jobmodel import PARKED, JobModel

HOSTS: dict[str, tuple[int, ...]] = {"a": (0,), "c": (1,)}


class _Coordinator:
    """The coordinator stream as the reporter reads it: no other host, worker 0's report;
    and what worker 0 restored for each task when it last added it (task → (records,
    epoch, changelog offset restored to)), which a worker reports for every task it runs.
    A task's store stands at offset 10 × epoch: it moves on as the task runs."""

    def __init__(self) -> None:
        self.workers: dict[int, WorkerReport] = {}
        self.restores: dict[str, tuple[int, int, int]] = {}

    async def read(self) -> Any:
        return SimpleNamespace(hosts={}, workers=dict(self.workers))


def _parked(model: JobModel, task: str, host: str) -> JobModel:
    """``model`` with ``task`` parked until ``host`` lets it go."""
    return replace(model, tasks={**model.tasks, task: replace(model.tasks[task], worker=PARKED)},
                   parked={task: host})


@pytest.fixture
def reporter(monkeypatch: pytest.MonkeyPatch) -> tuple[HostReporter, _Coordinator]:
    async def publish(*_: object) -> None:
        return None

    monkeypatch.setattr(reporting, "publish_host_report", publish)
    monkeypatch.setattr(reporting, "POLL_S", 0.0)  # each tick looks for the workers' reports
    coordinator = _Coordinator()
    return HostReporter(SimpleNamespace(), SimpleNamespace(), coordinator,  # type: ignore[arg-type]
                        "a", "m"), coordinator


def _resume(reporter: HostReporter, coordinator: _Coordinator, epoch: int,
            tasks: list[str], added: dict[str, int], *, collected: bool = True,
            resumed_ms: int = 2) -> None:
    """Worker 0 resumed ``epoch`` running ``tasks``, having added ``added`` now (records
    restored, delta); the host looks at its report unless not ``collected`` yet."""
    coordinator.restores.update((t, (n, epoch, 10 * epoch)) for t, n in added.items())
    mine = {t: coordinator.restores[t] for t in tasks if t in coordinator.restores}
    coordinator.workers[0] = WorkerReport(
        epoch=epoch, pid=1, started_ms=1, resumed_ms=resumed_ms, tasks=tasks,
        restore_modes={f"{t}/totals": "delta" for t in coordinator.restores},
        store_positions={t: {"totals": 10 * epoch} for t in tasks},
        restored_tasks={t: n for t, (n, _, _) in mine.items()},
        task_epochs={t: e for t, (_, e, _) in mine.items()},
        restored_ends={t: end for t, (_, _, end) in mine.items()})
    if collected:
        asyncio.run(reporter.tick({}))


def test_a_follow_up_after_a_quiet_first_model_reports_only_its_own_moves(
        reporter: tuple[HostReporter, _Coordinator]) -> None:
    """Host a gains Partition 0 in one rebalance, then Partition 1 in the next; that one's
    first model (parking Partition 1 on c) moves nothing to or from a. Its follow-up
    reports Partition 1 gained — not Partition 0 too, the older move the quiet first model
    kept in the report (a fresh-clone run saw the old move reported, without its restore)."""
    report, coordinator = reporter
    on_c = placed(2, HOSTS, {"Partition 0": 1, "Partition 1": 1})
    asyncio.run(report.assigned(on_c, None, [0], [], [], [], leader=False))
    first = _parked(replace(on_c, epoch=3), "Partition 0", "c")
    asyncio.run(report.assigned(first, on_c, [0], [], [], [], leader=False, kept=True))
    follow = placed(4, HOSTS, {"Partition 0": 0, "Partition 1": 1})
    asyncio.run(report.in_place(follow, first, ["Partition 0"]))
    _resume(report, coordinator, 4, ["Partition 0"], {"Partition 0": 10})
    assert report.report.gained == {"Partition 0": "c"}
    assert report.report.moved_epoch == 3  # the rebalance's first model
    assert report.report.restore_modes == {"Partition 0/totals": "delta"}

    quiet = _parked(replace(follow, epoch=5), "Partition 1", "c")
    asyncio.run(report.assigned(quiet, follow, [0], ["Partition 0"], [], [], leader=False,
                                kept=True))
    _resume(report, coordinator, 5, ["Partition 0"], {})
    assert report.report.gained == {"Partition 0": "c"}  # the last move stays reported
    assert report.report.moved_epoch == 3
    assert report.report.restored == {"Partition 0": 10}

    both = placed(6, HOSTS, {"Partition 0": 0, "Partition 1": 0})
    asyncio.run(report.in_place(both, quiet, ["Partition 0", "Partition 1"]))
    _resume(report, coordinator, 6, ["Partition 0", "Partition 1"], {"Partition 1": 10})
    assert report.report.gained == {"Partition 1": "c"}
    assert report.report.lost == [] and report.report.moved_epoch == 5
    assert report.report.restored == {"Partition 0": 0, "Partition 1": 10}
    # every task the report says moved here has its restore named
    assert {k.split("/")[0] for k in report.report.restore_modes} == set(
        report.report.gained)


def test_a_follow_up_merges_what_its_first_model_moved(
        reporter: tuple[HostReporter, _Coordinator]) -> None:
    """One rebalance, one report: a first model that takes Partition 0 from a (parked for
    c) and the follow-up that gives a Partition 1 report both."""
    report, coordinator = reporter
    on_a = placed(2, HOSTS, {"Partition 0": 0, "Partition 1": 1})
    asyncio.run(report.assigned(on_a, None, [0], ["Partition 0"], [], [], leader=False))
    _resume(report, coordinator, 2, ["Partition 0"], {"Partition 0": 0})
    first = replace(_parked(replace(on_a, epoch=3), "Partition 0", "a"), parked={
        "Partition 0": "a", "Partition 1": "c"}, tasks={
        **on_a.tasks, **{t: replace(on_a.tasks[t], worker=PARKED) for t in on_a.tasks}})
    asyncio.run(report.assigned(first, on_a, [0], [], [], [], leader=False, kept=True))
    assert report.report.lost == ["Partition 0"]
    follow = placed(4, HOSTS, {"Partition 0": 1, "Partition 1": 0})
    asyncio.run(report.in_place(follow, first, ["Partition 1"]))
    _resume(report, coordinator, 4, ["Partition 1"], {"Partition 1": 10})
    assert report.report.gained == {"Partition 1": "c"}
    assert report.report.lost == ["Partition 0"] and report.report.moved_epoch == 3
    assert report.report.restored == {"Partition 1": 10}


@pytest.mark.parametrize("collected", [True, False])
def test_a_follow_up_keeps_what_its_first_model_restored(
        reporter: tuple[HostReporter, _Coordinator], collected: bool) -> None:
    """A failover's first model gives a the dead host b's Partition 3 at once (restored
    fully: 12 records) and parks Partition 4 until c lets it go; the follow-up gives a
    Partition 4. The follow-up's report names both moves with their restores — whether
    or not the host had read its worker's report of the first model before the follow-up
    came (a fresh-clone run saw Partition 3 reported restored 0, without a mode) — and
    the changelog offsets each was restored to, not where Partition 3's store stands after
    running through the follow-up (CI saw a full restore of 9 records reported against
    the store's later offset)."""
    report, coordinator = reporter
    three: dict[str, tuple[int, ...]] = {"a": (0,), "b": (2,), "c": (1,)}
    two: dict[str, tuple[int, ...]] = {"a": (0,), "c": (1,)}
    running = placed(5, three, {"Partition 2": 0, "Partition 3": 2, "Partition 4": 1})
    asyncio.run(report.assigned(running, None, [0], ["Partition 2"], [], [], leader=False))
    _resume(report, coordinator, 5, ["Partition 2"], {"Partition 2": 0})
    first = _parked(placed(6, two, {"Partition 2": 0, "Partition 3": 0, "Partition 4": 1}),
                    "Partition 4", "c")
    asyncio.run(report.assigned(first, running, [0], ["Partition 2", "Partition 3"], [], [],
                                leader=False, kept=True))
    _resume(report, coordinator, 6, ["Partition 2", "Partition 3"], {"Partition 3": 12},
            collected=collected)
    follow = placed(7, two, {"Partition 2": 0, "Partition 3": 0, "Partition 4": 0})
    asyncio.run(report.in_place(follow, first, ["Partition 2", "Partition 3", "Partition 4"]))
    _resume(report, coordinator, 7, ["Partition 2", "Partition 3", "Partition 4"],
            {"Partition 4": 0})
    assert report.report.gained == {"Partition 3": "b", "Partition 4": "c"}
    assert report.report.moved_epoch == 6
    assert report.report.restored == {"Partition 2": 0, "Partition 3": 12, "Partition 4": 0}
    assert report.report.restore_modes == {"Partition 3/totals": "delta",
                                           "Partition 4/totals": "delta"}
    assert report.report.restore_ends == {"Partition 2": 50, "Partition 3": 60,
                                          "Partition 4": 70}


def test_a_move_not_yet_resumed_is_measured_when_a_quiet_model_follows(
        reporter: tuple[HostReporter, _Coordinator], monkeypatch: pytest.MonkeyPatch) -> None:
    """A failover gives a the dead host b's Partition 3 (at t = 1,000 ms); a probing
    rebalance's model that moves nothing comes (t = 3,000) before a's worker resumed, which
    it does at t = 5,000. The report names Partition 3 gained from b and unavailable for
    4,000 ms (from the failover's model, not the quiet one) — a loaded CI run saw it
    reported gained with no unavailability (`test_failover_without_standbys_…`)."""
    report, coordinator = reporter
    clock = [0]
    monkeypatch.setattr(reporting, "_now_ms", lambda: clock[0])
    three: dict[str, tuple[int, ...]] = {"a": (0,), "b": (2,), "c": (1,)}
    two: dict[str, tuple[int, ...]] = {"a": (0,), "c": (1,)}
    running = placed(5, three, {"Partition 2": 0, "Partition 3": 2, "Partition 4": 1})
    asyncio.run(report.assigned(running, None, [0], ["Partition 2"], [], [], leader=False))
    _resume(report, coordinator, 5, ["Partition 2"], {"Partition 2": 0})
    clock[0] = 1000
    failover = placed(6, two, {"Partition 2": 0, "Partition 3": 0, "Partition 4": 1})
    asyncio.run(report.assigned(failover, running, [0], ["Partition 2", "Partition 3"], [],
                                [], leader=False, kept=True))
    clock[0] = 3000
    probing = replace(failover, epoch=7)
    asyncio.run(report.assigned(probing, failover, [0], ["Partition 2", "Partition 3"], [],
                                [], leader=False, kept=True))
    clock[0] = 5000
    _resume(report, coordinator, 7, ["Partition 2", "Partition 3"], {"Partition 3": 12},
            resumed_ms=5000)
    assert report.report.resumed_ms == 5000
    assert report.report.gained == {"Partition 3": "b"}
    assert report.report.moved_epoch == 6
    assert report.report.unavailable_ms == {"Partition 3": 4000}
    assert report.report.restored == {"Partition 2": 0, "Partition 3": 12}


def test_a_move_not_yet_collected_is_measured_when_its_follow_up_moves_nothing_here(
        reporter: tuple[HostReporter, _Coordinator], monkeypatch: pytest.MonkeyPatch) -> None:
    """A failover's first model (t = 1,000 ms) gives a the dead host b's Partition 3 and
    parks a's Partition 4 for c; a's worker resumes (t = 4,000) and the leader publishes
    the follow-up before a's host read that report. The follow-up moves nothing to or from
    a; a's report still names Partition 3 gained from b, unavailable for 3,000 ms."""
    report, coordinator = reporter
    clock = [0]
    monkeypatch.setattr(reporting, "_now_ms", lambda: clock[0])
    three: dict[str, tuple[int, ...]] = {"a": (0,), "b": (2,), "c": (1,)}
    two: dict[str, tuple[int, ...]] = {"a": (0,), "c": (1,)}
    running = placed(5, three, {"Partition 2": 0, "Partition 3": 2, "Partition 4": 0})
    asyncio.run(report.assigned(running, None, [0], ["Partition 2", "Partition 4"], [], [],
                                leader=False))
    _resume(report, coordinator, 5, ["Partition 2", "Partition 4"], {"Partition 2": 0})
    clock[0] = 1000
    first = _parked(placed(6, two, {"Partition 2": 0, "Partition 3": 0, "Partition 4": 1}),
                    "Partition 4", "a")
    asyncio.run(report.assigned(first, running, [0], ["Partition 2", "Partition 3"], [], [],
                                leader=False, kept=True))
    _resume(report, coordinator, 6, ["Partition 2", "Partition 3"], {"Partition 3": 12},
            collected=False, resumed_ms=4000)
    clock[0] = 4500
    follow = placed(7, two, {"Partition 2": 0, "Partition 3": 0, "Partition 4": 1})
    asyncio.run(report.in_place(follow, first, ["Partition 2", "Partition 3"]))
    _resume(report, coordinator, 7, ["Partition 2", "Partition 3"], {}, resumed_ms=4000)
    assert report.report.resumed_ms == 4000
    assert (report.report.gained, report.report.lost) == ({"Partition 3": "b"},
                                                          ["Partition 4"])
    assert report.report.moved_epoch == 6
    assert report.report.unavailable_ms == {"Partition 3": 3000}
    assert report.report.restored == {"Partition 2": 0, "Partition 3": 12}
