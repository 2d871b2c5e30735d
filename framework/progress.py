"""Progress of long operations (store restores, drills): a bar for people, log lines for logs.

On a terminal (stderr is a TTY) a `rich` progress bar is drawn; every other time (workers
under a supervisor, CI) INFO log lines are written at 25/50/75% and at least every
``interval`` seconds, each with the counts and the rate so far, so logs stay short but a
stuck operation is still visible. The end of an operation that completes is the caller's
to log, with the one rate of the whole operation (a restore says how long it took); an
operation that stopped short, or whose total was unknown, is reported here when closed.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Protocol

__all__ = ["Progress", "ProgressFactory", "Reporter"]

log = logging.getLogger(__name__)

_MILESTONES = (25, 50, 75)


class Reporter(Protocol):
    """What an operation calls while it runs."""

    def advance(self, amount: int) -> None:
        """Record ``amount`` more units done."""
        ...

    def close(self) -> None:
        """The operation ended (done or failed); write the final report."""
        ...


ProgressFactory = Callable[[str, int | None], Reporter]
"""Makes a reporter from a description and a total (None when unknown)."""


class Progress:
    """Reports ``done/total`` of one operation; use as a context manager or call `close`.

    >>> with Progress("restore store counts", 4, tty=False) as progress:
    ...     progress.advance(4)
    >>> progress.done
    4
    """

    def __init__(
        self,
        description: str,
        total: int | None,
        *,
        unit: str = "records",
        interval: float = 10.0,
        logger: logging.Logger | None = None,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.description = description
        self.total = total
        self.unit = unit
        self.done = 0
        self._interval = interval
        self._log = logger or log
        self._clock = clock
        self._started = clock()
        self._last_line = self._started
        self._next_milestone = 0  # index into _MILESTONES
        self._closed = False
        self._bar: _Bar | None = None
        if sys.stderr.isatty() if tty is None else tty:
            self._bar = _Bar.shared()
            self._bar.add(self)

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def advance(self, amount: int) -> None:
        self.done += amount
        if self._bar is not None:
            self._bar.update(self)
            return
        now = self._clock()
        crossed = False
        if self.total:
            percent = self.done * 100 // self.total
            while (
                self._next_milestone < len(_MILESTONES)
                and percent >= _MILESTONES[self._next_milestone]
            ):
                self._next_milestone += 1
                crossed = True
        if crossed or now - self._last_line >= self._interval:
            self._line(now)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.remove(self)
            return
        if not self.total or self.done < self.total:
            self._line(self._clock(), final=True)

    def rate(self, now: float | None = None) -> float:
        """Units per second since the start."""
        elapsed = (self._clock() if now is None else now) - self._started
        return self.done / elapsed if elapsed > 0 else 0.0

    def _line(self, now: float, *, final: bool = False) -> None:
        self._last_line = now
        if self.total:
            counts = f"{self.done:,}/{self.total:,} {self.unit} ({self.done * 100 // self.total}%)"
        else:
            counts = f"{self.done:,} {self.unit}"
        if not final:
            status = ""
        elif self.total is None or self.done >= self.total:
            status = " done"
        else:
            status = " stopped"
        self._log.info(
            "%s: %s%s at %s %s/s",
            self.description,
            counts,
            status,
            f"{self.rate(now):,.0f}",
            self.unit,
        )


class _Bar:
    """One rich live display shared by every open `Progress` (rich allows one at a time)."""

    _instance: _Bar | None = None

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as RichProgress

        self._rich = RichProgress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[unit]}"),
            TextColumn("{task.fields[rate]}/s"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
        )
        self._tasks: dict[int, Any] = {}

    @classmethod
    def shared(cls) -> _Bar:
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def add(self, progress: Progress) -> None:
        if not self._tasks:
            self._rich.start()
        self._tasks[id(progress)] = self._rich.add_task(
            progress.description, total=progress.total, unit=progress.unit, rate="0"
        )

    def update(self, progress: Progress) -> None:
        self._rich.update(
            self._tasks[id(progress)], completed=progress.done, rate=f"{progress.rate():,.0f}"
        )

    def remove(self, progress: Progress) -> None:
        task = self._tasks.pop(id(progress))
        self._rich.update(task, completed=progress.done, rate=f"{progress.rate():,.0f}")
        if not self._tasks:
            self._rich.stop()  # leaves the finished bars on screen
            for other in list(self._rich.task_ids):
                self._rich.remove_task(other)
