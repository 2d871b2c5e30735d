"""Fault injection for tests and drills: hold the group leader inside a round, or keep a
dead host's tasks ownerless for longer.

``SAMPAN_FAULT_LEADER_HOLD_MS=N`` makes a host, the first time it leads a round of two or
more hosts, wait up to N ms before it answers the round (after JoinGroup, before SyncGroup):
the window in which a departing leader used to strand the others on tansu. A SIGTERM during
the hold makes the host abandon the round and stop, as a leader stopped in that window
does. Unset (the default) it does nothing.

``SAMPAN_FAULT_SESSION_TIMEOUT_MS=N`` gives a host's group member a session timeout of N ms
instead of ``coordinator.session_timeout_ms`` (its heartbeats keep the job's interval):
the broker notices a SIGKILLed host only after N ms, so its tasks stay without an owner
that long — the window in which standby reads (`framework.queries.standby`) answer.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from types import FrameType

from framework.hosts.errors import HostError

__all__ = ["ENV", "SESSION_ENV", "LeaderHold", "RoundAbandoned", "session_timeout_ms"]

ENV = "SAMPAN_FAULT_LEADER_HOLD_MS"
SESSION_ENV = "SAMPAN_FAULT_SESSION_TIMEOUT_MS"

log = logging.getLogger(__name__)


class RoundAbandoned(HostError):
    """The leader was stopped while holding a round (fault injection): no answer is sent."""


class LeaderHold:
    """The one-shot hold `ENV` asks for."""

    def __init__(self) -> None:
        raw = os.environ.get(ENV, "")
        self.hold_ms = int(raw) if raw.strip() else 0
        self.done = False
        self.abandoned = False
        """Set by a SIGTERM during the hold: every later round is abandoned too (aiokafka
        retries a join whose assignment failed, and the stopping host must not answer it)."""

    def __call__(self, hosts: int) -> None:
        """Hold (leader step, event loop blocked) if due; raise `RoundAbandoned` when a
        SIGTERM arrives meanwhile (the caller stops the host), and for every round after."""
        if self.abandoned:
            raise RoundAbandoned("stopping after a round abandoned (fault injection)")
        if self.done or not self.hold_ms or hosts < 2:
            return
        self.done = True
        got: list[int] = []

        def heard(signum: int, frame: FrameType | None) -> None:
            got.append(signum)

        log.warning("fault injection (%s): the leader holds this round of %d hosts for up "
                    "to %d ms before answering", ENV, hosts, self.hold_ms)
        previous = signal.signal(signal.SIGTERM, heard)
        try:
            deadline = time.monotonic() + self.hold_ms / 1000
            while not got and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            signal.signal(signal.SIGTERM, previous)
        if got:
            self.abandoned = True
            log.warning("fault injection (%s): SIGTERM while holding the round: abandoning "
                        "it unanswered", ENV)
            raise RoundAbandoned("stopped while holding the round (fault injection)")
        log.warning("fault injection (%s): hold over, answering the round", ENV)


def session_timeout_ms(configured: int) -> int:
    """This host's group session timeout: `SESSION_ENV` when set, else ``configured``."""
    raw = os.environ.get(SESSION_ENV, "")
    if not raw.strip():
        return configured
    log.warning("fault injection (%s): this host's group session timeout is %s ms, not "
                "the job's %d ms", SESSION_ENV, raw.strip(), configured)
    return int(raw)
