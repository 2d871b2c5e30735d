"""`framework.worker.scheduling.CommitSchedule` alone, with a fake committer: when a commit
is due, and tasks let go are committed once more and closed only once that commit landed."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import cast

import pytest

from framework.worker.commit import Committer
from framework.worker.instance import TaskInstance
from framework.worker.scheduling import CommitSchedule, Next


class FakeStore:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeInstance:
    name: str
    stores: dict[str, FakeStore] = field(default_factory=lambda: {"s": FakeStore()})


class FakeCommitter:
    """Numbers commits as `Committer` does; each lands when ``land`` is called."""

    def __init__(self) -> None:
        self.prepared = self.landed = 0
        self.positions: dict[tuple[str, str], int] = {("a", "s"): 1, ("gone", "s"): 2}
        self.started: list[list[str]] = []

    async def start(self, instances: Sequence[TaskInstance]) -> None:
        self.prepared += 1
        self.started.append([i.name for i in instances])

    async def settle(self) -> None:
        self.landed = self.prepared


def instance(name: str) -> TaskInstance:
    return cast(TaskInstance, FakeInstance(name))


def committer() -> tuple[Committer, FakeCommitter]:
    fake = FakeCommitter()
    return cast(Committer, fake), fake


async def through(step: Awaitable[None]) -> bool:
    await step
    return True


def decide(schedule: CommitSchedule, now: float, *, dirty: bool = True, wanted: bool = False,
           full: bool = False, stopping: bool = False, in_flight: bool = False,
           written: bool = False) -> Next:
    return schedule.next(now, dirty=dirty, wanted=wanted, full=full, stopping=stopping,
                         in_flight=in_flight, written=written)


def test_a_commit_is_due_once_its_interval_passed_with_something_to_commit() -> None:
    schedule = CommitSchedule(5.0, now=100.0)
    assert decide(schedule, 104.9) is Next.NOTHING
    assert decide(schedule, 105.0) is Next.START
    assert decide(schedule, 105.0, dirty=False) is Next.NOTHING
    schedule.started(105.0)
    assert decide(schedule, 109.9) is Next.NOTHING


def test_a_task_asking_commits_before_the_interval() -> None:
    schedule = CommitSchedule(5.0, now=100.0)
    assert decide(schedule, 101.0, wanted=True) is Next.START
    assert decide(schedule, 101.0, wanted=True, dirty=False) is Next.NOTHING


def test_a_due_commit_waits_for_the_one_in_flight_unless_stopping_or_full() -> None:
    schedule = CommitSchedule(5.0, now=100.0)
    assert decide(schedule, 106.0, in_flight=True) is Next.NOTHING
    assert decide(schedule, 106.0, in_flight=True, stopping=True) is Next.START
    assert decide(schedule, 101.0, in_flight=True, full=True, wanted=True) is Next.START


def test_a_stop_commits_what_changed_before_the_interval() -> None:
    schedule = CommitSchedule(5.0, now=100.0)
    assert decide(schedule, 101.0, stopping=True) is Next.START
    assert decide(schedule, 101.0, stopping=True, dirty=False) is Next.NOTHING


def test_a_written_commit_is_settled_when_nothing_is_due() -> None:
    schedule = CommitSchedule(5.0, now=100.0)
    assert decide(schedule, 101.0, written=True) is Next.SETTLE
    assert decide(schedule, 101.0, written=False) is Next.NOTHING


async def test_a_task_let_go_is_carried_by_one_commit_then_closed_once_it_landed() -> None:
    schedule = CommitSchedule(5.0, now=100.0)
    running, gone = [instance("a")], instance("gone")
    schedule.let_go(gone)
    assert decide(schedule, 101.0, dirty=False) is Next.START  # due: carries the task
    assert schedule.to_commit(running) == [*running, gone]
    commits, fake = committer()
    assert await schedule.start(commits, running, through)
    assert fake.started == [["a", "gone"]] and schedule.ticket == 1
    assert schedule.to_commit(running) == running  # no later commit writes it
    assert decide(schedule, 101.0, dirty=False) is Next.NOTHING
    assert schedule.finish_releases(commits) == []  # not landed yet: stores stay open
    assert not cast(FakeInstance, gone).stores["s"].closed
    fake.landed = 1
    assert schedule.finish_releases(commits) == ["gone"]
    assert cast(FakeInstance, gone).stores["s"].closed
    assert fake.positions == {("a", "s"): 1} and schedule.releasing == {}


async def test_a_refused_commit_is_no_ticket() -> None:
    schedule = CommitSchedule(5.0, now=100.0)
    schedule.let_go(instance("gone"))
    commits, _ = committer()

    async def fenced(step: Awaitable[None]) -> bool:
        step.close()  # type: ignore[attr-defined]
        return False

    assert not await schedule.start(commits, [instance("a")], fenced)
    assert schedule.ticket is None and schedule.carrying_due


async def test_tasks_let_go_are_committed_at_once_when_one_is_taken_back() -> None:
    schedule = CommitSchedule(5.0, now=100.0)
    schedule.let_go(instance("gone"))
    commits, fake = committer()
    assert await schedule.commit_releases(commits, [instance("a")]) == ["gone"]
    assert fake.started == [["a", "gone"]] and fake.landed == 1


@pytest.mark.parametrize("again", [True, False])
async def test_a_task_let_go_again_before_its_commit_started_waits_for_the_next(
        again: bool) -> None:
    schedule = CommitSchedule(5.0, now=100.0)
    commits, fake = committer()
    schedule.let_go(instance("gone"))
    await schedule.start(commits, [], through)
    if again:
        schedule.let_go(instance("other"))  # a later let-go needs a later commit
        assert schedule.ticket is None
        fake.landed = 1
        assert schedule.finish_releases(commits) == []
    else:
        fake.landed = 1
        assert schedule.finish_releases(commits) == ["gone"]
