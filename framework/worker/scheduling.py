"""When a worker commits, and what each commit takes: the running tasks, and the tasks a
newer model let go until one commit carrying their last writes started; their stores close
once that commit landed."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from enum import Enum

from framework.worker.commit import Committer
from framework.worker.instance import TaskInstance

__all__ = ["CommitSchedule", "Next", "close_stores", "forget_positions"]

log = logging.getLogger(__name__)


def close_stores(instance: TaskInstance) -> None:
    """Close every store of ``instance``; a failure is logged, never raised (it must not
    mask what stopped the task)."""
    for name, store in instance.stores.items():
        try:
            store.close()
        except Exception as error:
            log.warning("closing store %r of task %r failed: %s", name, instance.name, error)


def forget_positions(committer: Committer, task: str) -> None:
    """Stop tracking the changelog positions of ``task``'s stores (it left this worker)."""
    for key in [k for k in committer.positions if k[0] == task]:
        del committer.positions[key]


class Next(Enum):
    """What a pass of the worker's loop does about commits."""

    NOTHING = "nothing"
    START = "start"
    """Prepare and start the next commit."""
    SETTLE = "settle"
    """Wait for the commit written (a failed one stops the worker now)."""


class CommitSchedule:
    """Commit timing (every ``interval_s`` when anything changed, at once when asked or a
    buffer is full) and the tasks let go that the next commit still takes."""

    def __init__(self, interval_s: float, now: float) -> None:
        self.interval_s = interval_s
        self.next_at = now + interval_s
        self.releasing: dict[str, TaskInstance] = {}
        """Tasks a newer model let go: closed and no longer read, their stores open until
        the commit carrying their last writes lands (`finish_releases`)."""
        self.ticket: int | None = None
        """The number of that commit once started (`Committer.landed`)."""

    def next(self, now: float, *, dirty: bool, wanted: bool, full: bool, stopping: bool,
             in_flight: bool, written: bool) -> Next:
        """What to do this pass: a commit is due when anything changed and its interval
        passed or a task asked for one (``wanted``), and always while tasks let go wait
        for theirs. A due commit waits while the previous one is in flight (the tasks go
        on), unless the worker stops or a buffer is full."""
        due = (dirty and (now >= self.next_at or wanted)) or self.carrying_due
        if due and in_flight and not (stopping or full):
            return Next.NOTHING  # prepared once the one in flight landed
        if due or (stopping and dirty):
            return Next.START
        return Next.SETTLE if written else Next.NOTHING

    def started(self, now: float) -> None:
        """A commit was started (or refused): the next one is due an interval from now."""
        self.next_at = now + self.interval_s

    @property
    def carrying_due(self) -> bool:
        """Tasks were let go and no commit carrying them started yet."""
        return bool(self.releasing) and self.ticket is None

    def let_go(self, instance: TaskInstance) -> None:
        """``instance`` (closed, no longer routed) is committed once more, then closed."""
        self.releasing[instance.name] = instance
        self.ticket = None  # the next commit carries it

    def to_commit(self, running: list[TaskInstance]) -> list[TaskInstance]:
        """The instances the next commit takes: the running ones, and the tasks let go
        until one commit carrying them started (no later commit may write them)."""
        if self.carrying_due:
            return [*running, *self.releasing.values()]
        return running

    async def start(self, committer: Committer, running: list[TaskInstance],
                    guard: Callable[[Awaitable[None]], Awaitable[bool]]) -> bool:
        """`Committer.start` of `to_commit` through ``guard`` (the fence's handling): True
        when it went through; a commit that carries tasks let go is their ticket."""
        instances = self.to_commit(running)
        before = committer.prepared
        went = await guard(committer.start(instances))
        self.carried(instances, running, committer, before)
        return went

    def carried(self, instances: Sequence[TaskInstance], running: Sequence[TaskInstance],
                committer: Committer, before: int) -> None:
        """A commit of ``instances`` may have started (``committer.prepared`` was
        ``before``): when it took tasks let go, it is their ticket."""
        if len(instances) > len(running) and committer.prepared > before:
            self.ticket = committer.prepared

    def finish_releases(self, committer: Committer) -> list[str]:
        """Close the stores of the tasks let go once their last commit landed: their
        names (none while it has not)."""
        if not self.releasing or self.ticket is None or committer.landed < self.ticket:
            return []
        for name, instance in self.releasing.items():
            forget_positions(committer, name)
            close_stores(instance)
        names = sorted(self.releasing)
        self.releasing, self.ticket = {}, None
        return names

    async def commit_releases(self, committer: Committer,
                              running: list[TaskInstance]) -> list[str]:
        """Commit the tasks let go now and close their stores (one is taken back): their
        names."""
        if self.ticket is None:
            await committer.start(self.to_commit(running))
            self.ticket = committer.prepared
        await committer.settle()
        return self.finish_releases(committer)
