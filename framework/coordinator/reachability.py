"""Which of a job's systems its coordinator cannot reach, and since when.

The coordinator runs its calls to a system inside `Reachability.watch`: a call that fails
with `SystemUnavailableError` opens an outage of that system (logged once, with the time
it began), the next call that succeeds closes it. Open outages are kept in the
coordinator's status (`CoordinatorStatus.unreachable`) and in its run file
(`framework.coordinator.runfile`), so `sampan status` reports the job as degraded even
while the metadata system holding that status does not answer.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator

from framework.errors import SystemUnavailableError
from framework.metadata import CoordinatorStatus, Unreachable

__all__ = ["Reachability"]

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


class Reachability:
    """The open outages of a coordinator's systems, kept in ``status.unreachable``;
    ``on_change`` runs whenever one opens or closes."""

    def __init__(self, status: CoordinatorStatus, on_change: Callable[[], None]) -> None:
        self.status = status
        self.on_change = on_change

    @contextlib.contextmanager
    def watch(self, system: str) -> Iterator[None]:
        """Around one call to ``system``: an unavailable system opens (or extends) its
        outage and the error propagates; a call that returns closes it."""
        try:
            yield
        except SystemUnavailableError as error:
            self.failed(system, error)
            raise
        self.reached(system)

    def failed(self, system: str, error: Exception) -> None:
        """``system`` did not answer now."""
        now = _now_ms()
        for outage in self.status.unreachable:
            if outage.system == system:
                outage.checked_ms, outage.error = now, str(error)
                return
        log.warning("system %r of the job is unreachable: %s", system, error)
        self.status.unreachable.append(Unreachable(system=system, since_ms=now,
                                                   error=str(error), checked_ms=now))
        self.on_change()

    def reached(self, system: str) -> None:
        """``system`` answered now."""
        for outage in list(self.status.unreachable):
            if outage.system == system:
                self.status.unreachable.remove(outage)
                log.info("system %r of the job is reachable again after %.1f s", system,
                         (_now_ms() - outage.since_ms) / 1000)
                self.on_change()

    def down(self, system: str) -> bool:
        """Whether an outage of ``system`` is open."""
        return any(outage.system == system for outage in self.status.unreachable)
