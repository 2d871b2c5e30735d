"""Which of a job's systems its coordinator cannot reach, and since when.

The coordinator runs its calls to a system inside `Reachability.watch`: a call that fails
with `SystemUnavailableError` opens an outage of that system (logged once, with the time
it began), the next call that succeeds closes it. Open outages are kept in the
coordinator's status (`CoordinatorStatus.unreachable`) and in its run file
(`framework.coordinator.runfile`), so `sampan status` reports the job as degraded even
while the metadata system holding that status does not answer. An outage longer than
``coordinator.max_unreachable_ms`` stops the job (`Reachability.too_long`): its workers
wait for the system meanwhile (`framework.worker.outage`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping

from framework.config import SystemConfig
from framework.errors import SystemUnavailableError
from framework.metadata import CoordinatorStatus, Unreachable

__all__ = ["Reachability", "UnreachableTooLongError"]

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


class UnreachableTooLongError(SystemUnavailableError):
    """A system of the job did not answer for longer than ``coordinator.max_unreachable_ms``."""


def _where(system: SystemConfig) -> tuple[str, str]:
    """How to name ``system`` to people, and what to check when it does not answer."""
    if system.type == "kafka":
        return (f"Kafka at {system.bootstrap}",
                f"check that the brokers at {system.bootstrap} run and that this machine "
                f"reaches them ([systems.{system.name}] bootstrap; a broker's own log says "
                "why it stopped)")
    return (f"the local log at {system.path}",
            f"check that {system.path} is readable and not locked by another program")


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

    def too_long(self, bound_ms: int, systems: Mapping[str, SystemConfig], job_file: str
                 ) -> UnreachableTooLongError | None:
        """The error that stops the job when an open outage is older than ``bound_ms``
        (0: never), naming the system and what to check; else None."""
        if not bound_ms:
            return None
        now = _now_ms()
        for outage in self.status.unreachable:
            if now - outage.since_ms <= bound_ms or outage.system not in systems:
                continue
            where, check = _where(systems[outage.system])
            since = time.strftime("%H:%M:%S", time.localtime(outage.since_ms / 1000))
            return UnreachableTooLongError(
                f"{where} (system {outage.system!r}) has not answered for "
                f"{(now - outage.since_ms) / 1000:.0f} s (since {since}), longer than "
                f"[coordinator] max_unreachable_ms = {bound_ms}: the job stopped and nothing "
                f"is lost; {check}, then run `sampan run {job_file}` again: it resumes from "
                "the last commit")
        return None
