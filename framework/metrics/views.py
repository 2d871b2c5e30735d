"""What is read of a running worker from outside its loop: by the metrics server's thread
and by the task watchdog's (`framework.worker.watchdog`). Here, below both, so that
metrics need not import the worker."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from groupers import SystemStreamPartition

__all__ = ["Busy", "TaskProgress"]


class TaskProgress(Protocol):
    """What is read of a running task from outside its loop (a `TaskInstance`): the task
    watchdog's and the metrics' view of it."""

    @property
    def name(self) -> str: ...

    @property
    def positions(self) -> Mapping[SystemStreamPartition, int]: ...

    @property
    def processed(self) -> int: ...

    @property
    def skipped(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Busy:
    """What the worker is doing: ``call`` of ``tasks`` on ``ssp`` (None for `window`)."""

    call: str
    tasks: Sequence[TaskProgress]
    ssp: SystemStreamPartition | None = None

    def progress(self) -> int:
        return sum(t.processed + t.skipped for t in self.tasks)

    def describe(self) -> str:
        names = ", ".join(repr(t.name) for t in self.tasks)
        if self.ssp is None:
            return f"task {names} stuck in {self.call}()"
        offset = min(t.positions.get(self.ssp, 0) for t in self.tasks)
        return f"task {names} stuck in {self.call}() on {self.ssp} offset {offset}"
