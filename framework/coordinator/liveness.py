"""Whether a job's coordinator still runs, checked where `sampan status` can see it.

The coordinator stream keeps the coordinator's last report — ``running`` included — after
the coordinator was killed. So before status believes a ``running`` report it asks those
who know: the process (when the coordinator ran on this machine, its pid must be alive)
and the job's lease (on the local log its row must be held and not expired; on Kafka the
group ``__sampan-<job>-coordinators`` must have a member, which Kafka drops once the
coordinator stopped heartbeating for its session timeout).
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

from framework.coordinator.lease import Holder, LeaseStore, pid_alive
from framework.metadata import CoordinatorStatus
from framework.systems.base import ConsumerGroups, System

__all__ = ["Liveness", "check_coordinator"]


@dataclass(frozen=True)
class Liveness:
    """The verdict: ``alive``, or gone with the ``detail`` of how we know."""

    alive: bool
    detail: str | None = None


def _clock(ms: int | None) -> str:
    if ms is None:
        return "an unknown time"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


async def check_coordinator(meta: System, job: str, status: CoordinatorStatus) -> Liveness:
    """Whether the coordinator that wrote ``status`` (a ``running`` report) still runs,
    judged by its process and by the lease of ``job`` in the metadata system ``meta``."""
    local = isinstance(meta, LeaseStore)
    host = status.coordinator_host or (socket.gethostname() if local else None)
    pid = status.coordinator_pid
    if host == socket.gethostname() and pid is not None and not pid_alive(pid):
        return Liveness(False, f"its coordinator (pid {pid} on {host}) is gone: it was killed "
                               f"or crashed without reporting; its last report was at "
                               f"{_clock(status.updated_ms)}")
    if isinstance(meta, LeaseStore):
        lease = await meta.read_lease(job)
        if lease is None:
            return Liveness(False, "no coordinator holds the job's lease: its coordinator "
                                   "ended without reporting")
        holder, expires_ms = Holder.from_json(lease[0]), lease[1]
        if holder.gone():
            return Liveness(False, f"the holder of the job's lease (pid {holder.pid} on "
                                   f"{holder.host}) is gone: it was killed or crashed")
        if expires_ms < int(time.time() * 1000):
            return Liveness(False, f"the job's lease expired at {_clock(expires_ms)}: its "
                                   f"coordinator (pid {holder.pid} on {holder.host}) stopped "
                                   f"renewing it (killed, hung or suspended)")
        return Liveness(True)
    if not isinstance(meta, ConsumerGroups):
        return Liveness(True)
    group = f"__sampan-{job}-coordinators"
    members = await meta.group_members(group)
    if members == 0:
        return Liveness(False, f"the job's lease group {group} has no member: Kafka dropped "
                               f"its coordinator (pid {pid} on {host or 'its host'}) after "
                               f"the session timeout (killed, hung or cut off)")
    return Liveness(True)
