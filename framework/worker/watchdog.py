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
from collections.abc import Callable

from framework.errors import EXIT_STUCK
from framework.metrics.views import Busy, TaskProgress

__all__ = ["Busy", "Stall", "TaskProgress", "TaskWatchdog"]

log = logging.getLogger(__name__)


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
        stall = Stall(self._timeout_s)
        interval = min(1.0, self._timeout_s / 4)
        while not self._stop.wait(interval):
            busy = self._busy()
            if stall.observe(busy, time.monotonic(), interval):
                assert busy is not None
                log.error("%s for %.1f s (job.task_timeout_ms = %d); stopping this worker so "
                          "that it is restarted from its last commit", busy.describe(),
                          stall.seconds, int(self._timeout_s * 1000))
                for handler in logging.getLogger().handlers:
                    handler.flush()
                self._exit(EXIT_STUCK)
                return


class Stall:
    """How long one call has made no progress, by the watchdog's looks every ``interval``.

    Time the whole process was suspended (SIGSTOP, a paused VM, a starved machine) does not
    count: a look that comes more than `SUSPENDED_S` late shifts the start forward by the
    lateness, so a worker resumed after a long pause is judged by its own running time
    (a paused worker that was replaced meanwhile is fenced at its next commit instead).

    >>> stall = Stall(timeout_s=10)
    >>> busy = Busy("process", ())
    >>> [stall.observe(busy, now, 1.0) for now in (0, 1, 2)]
    [False, False, False]
    >>> stall.observe(busy, 60, 1.0), round(stall.seconds)  # 57 s suspended: not stuck
    (False, 3)
    >>> [stall.observe(busy, now, 1.0) for now in range(61, 69)][-1]  # 11 s of its own
    True
    """

    SUSPENDED_S = 5.0

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._last: Busy | None = None  # the same call (one Busy per call) …
        self._progress = -1  # … with the same progress since `_since`
        self._since = 0.0
        self._looked: float | None = None
        self.seconds = 0.0
        """How long the current call has gone without progress (running time)."""

    def observe(self, busy: Busy | None, now: float, interval: float) -> bool:
        """Record one look at ``now``; True when the call is stuck past the timeout."""
        late = 0.0 if self._looked is None else now - self._looked - interval
        self._looked = now
        if late > self.SUSPENDED_S:
            self._since += late
        if busy is None or busy is not self._last or busy.progress() != self._progress:
            self._last, self._since = busy, now
            self._progress = -1 if busy is None else busy.progress()
            self.seconds = 0.0
            return False
        self.seconds = now - self._since
        return self.seconds >= self.timeout_s
