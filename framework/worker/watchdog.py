"""The task watchdog: a worker whose task is stuck in one call stops, so it is restarted.

A thread (it must run while a synchronous `process` blocks the event loop) looks at what
the worker is busy with and at its tasks' progress counters; when one call has made no
progress for ``job.task_timeout_ms`` it logs the task, the SSP, the offset and the time,
and ends the process with `EXIT_STUCK`. Nothing uncommitted is kept, so nothing is lost:
`sampan run` restarts the worker from its last commit and reports the stuck task.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from framework.errors import EXIT_STUCK
from groupers import SystemStreamPartition

__all__ = ["Busy", "TaskWatchdog"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Busy:
    """What the worker is doing: ``call`` of ``tasks`` on ``ssp`` (None for `window`)."""

    call: str
    tasks: Sequence[object]  # TaskInstance: name, positions, processed, skipped
    ssp: SystemStreamPartition | None = None

    def progress(self) -> int:
        return sum(t.processed + t.skipped for t in self.tasks)  # type: ignore[attr-defined]

    def describe(self) -> str:
        names = ", ".join(repr(t.name) for t in self.tasks)  # type: ignore[attr-defined]
        if self.ssp is None:
            return f"task {names} stuck in {self.call}()"
        offset = min(t.positions.get(self.ssp, 0) for t in self.tasks)  # type: ignore[attr-defined]
        return f"task {names} stuck in {self.call}() on {self.ssp} offset {offset}"


class TaskWatchdog:
    """Ends this process when ``busy()`` shows no progress for ``timeout_s``."""

    def __init__(self, busy: Callable[[], Busy | None], timeout_s: float,
                 exit: Callable[[int], None] = os._exit) -> None:
        self._busy = busy
        self._timeout_s = timeout_s
        self._exit = exit
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="sampan-watchdog",
                                        daemon=True)

    def start(self) -> None:
        if self._timeout_s > 0:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)

    def _watch(self) -> None:
        last: Busy | None = None  # the same call (one Busy per call) …
        progress = -1  # … with the same progress for `since` seconds
        since = time.monotonic()
        while not self._stop.wait(min(1.0, self._timeout_s / 4)):
            busy = self._busy()
            now = time.monotonic()
            if busy is None or busy is not last or busy.progress() != progress:
                last, since = busy, now
                progress = -1 if busy is None else busy.progress()
                continue
            if now - since >= self._timeout_s:
                log.error("%s for %.1f s (job.task_timeout_ms = %d); stopping this worker so "
                          "that it is restarted from its last commit", busy.describe(),
                          now - since, int(self._timeout_s * 1000))
                for handler in logging.getLogger().handlers:
                    handler.flush()
                self._exit(EXIT_STUCK)
                return
