"""Task placement over hosts: the KIP-441 high-availability assignor, host by host.

Pure: the leader gathers members, changelog ranges and the previous model and calls
`place_on_hosts`; what comes out goes into the job model (`JobModel.hosts`, `standbys`,
`warmups`, and each task's worker id).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import groupers as G
from framework.hosts.member import Member
from framework.jobmodel import JobModel

__all__ = ["HostPlacement", "place_on_hosts", "restore_gaps"]

RestoreRange = tuple[int, int]
"""A task's changelog partition as a restore reads it: (oldest retained, restore end)."""


@dataclass(frozen=True)
class HostPlacement:
    """Where every task runs: worker ids per host, task → worker, standbys and warmups."""

    hosts: dict[str, tuple[int, ...]]
    workers: dict[str, int]
    standbys: dict[str, tuple[str, ...]]
    warmups: dict[str, tuple[str, ...]]
    probing: bool

    @property
    def total_workers(self) -> int:
        return sum(len(ids) for ids in self.hosts.values())


def restore_gaps(
    member: Member, changelogs: Mapping[str, int],
    ranges: Mapping[str, Mapping[str, RestoreRange]],
) -> dict[str, int]:
    """Task → changelog records ``member`` would restore to run it (tasks it holds no
    usable copy of any store of are left out: the assignor then treats them as absent)."""
    gaps: dict[str, int] = {}
    for task, stores in ranges.items():
        held = member.positions.get(task, {})
        gap, usable = 0, False
        for store, (oldest, end) in stores.items():
            position = held.get(store)
            if position is not None and position[0] == changelogs.get(task) and (
                    oldest <= position[1] <= end):
                gap += end - position[1]
                usable = True
            else:
                gap += end - oldest
        if usable:
            gaps[task] = gap
    return gaps


def place_on_hosts(
    members: Mapping[str, Member], changelogs: Mapping[str, int], previous: JobModel | None,
    ranges: Mapping[str, Mapping[str, RestoreRange]], *, stateful: bool, standbys: int,
    acceptable_recovery_lag: int, max_warmups: int,
) -> HostPlacement:
    """Place ``changelogs``' tasks on ``members`` (host name → member); a host's capacity is
    its workers, its worker ids follow the sorted host names, and inside a host its active
    tasks go round-robin over its workers in task order."""
    assignor = G.HighAvailabilityTaskAssignor(
        num_standbys=min(standbys, max(0, len(members) - 1)), max_warmups=max_warmups,
        acceptable_recovery_lag=acceptable_recovery_lag)
    clients = {}
    for host, member in members.items():
        gaps = restore_gaps(member, changelogs, ranges) if stateful else {}
        before = {t for t in changelogs if previous is not None and t in previous.tasks
                  and previous.host_of(t) == host}
        kept = {t for t in before if not stateful or (
            t in gaps and gaps[t] <= acceptable_recovery_lag)}
        clients[host] = G.ClientState(capacity=member.workers, previous_active=kept,
                                      task_lags=gaps)
    result = assignor.assign({task: stateful for task in changelogs}, clients)
    hosts: dict[str, tuple[int, ...]] = {}
    workers: dict[str, int] = {}
    first = 0
    for host in sorted(members):
        ids = tuple(range(first, first + members[host].workers))
        hosts[host] = ids
        first += len(ids)
        for i, task in enumerate(sorted(result.clients[host].active, key=G.task_sort_key)):
            workers[task] = ids[i % len(ids)]
    standby_hosts: dict[str, list[str]] = {}
    warmup_hosts: dict[str, list[str]] = {}
    for host in sorted(members):
        for task in result.clients[host].standby:
            standby_hosts.setdefault(task, []).append(host)
        for task in result.clients[host].warmup:
            warmup_hosts.setdefault(task, []).append(host)
    return HostPlacement(hosts, workers, {t: tuple(h) for t, h in sorted(standby_hosts.items())},
                         {t: tuple(h) for t, h in sorted(warmup_hosts.items())},
                         result.probing_rebalance_needed)
