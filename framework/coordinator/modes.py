"""One job, one mode: a one-host `sampan run` and `--host` runs of one job refuse each other.

On Kafka each mode is a consumer group of its own: a one-host coordinator holds its lease
in ``__sampan-<job>-coordinators``, hosts are members of ``__sampan-<job>-hosts``. Both
would run every task of the job (twice over: neither sees the other's workers), so each
mode asks the broker whether the other's group has members, before it joins its own and
again once it has (two starting at the same moment then both refuse — nothing runs twice).
A run that died stays a member until Kafka's session timeout removes it.
"""

from __future__ import annotations

from typing import Literal

from framework.errors import SampanError
from framework.systems.base import ConsumerGroups, System

__all__ = ["ModeConflictError", "refuse_other_mode"]

Mode = Literal["one-host", "hosts"]


class ModeConflictError(SampanError):
    """The job already runs in the other mode (one host / several hosts)."""


def _groups(job: str) -> dict[Mode, str]:
    return {"one-host": f"__sampan-{job}-coordinators", "hosts": f"__sampan-{job}-hosts"}


async def refuse_other_mode(system: System, job: str, mode: Mode, timeout_ms: int) -> None:
    """Raise `ModeConflictError` naming the other mode when its group has members on
    ``system`` (Kafka); a system without consumer groups has no other mode to find."""
    if not isinstance(system, ConsumerGroups):
        return
    other: Mode = "hosts" if mode == "one-host" else "one-host"
    members = await system.group_members(_groups(job)[other])
    if not members:
        return
    where = f"group {system.group_id(_groups(job)[other])} on {system.bootstrap}"
    expiry = f"a run that died leaves the group within its session timeout, {timeout_ms / 1000:g} s"
    if other == "hosts":
        raise ModeConflictError(
            f"job {job!r} already runs on several hosts (`sampan run --host`: {members} "
            f"member(s) in {where}); a one-host `sampan run` of it would run every task a "
            f"second time. Stop every host first, or run this one with --host NAME to join "
            f"them ({expiry})")
    raise ModeConflictError(
        f"job {job!r} already runs as a one-host `sampan run` (its coordinator holds the "
        f"lease in {where}); `--host` runs of it would run every task a second time. Stop "
        f"that run first (Ctrl-C, or kill its coordinator), then start the hosts ({expiry})")
