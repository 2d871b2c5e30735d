"""Task placement over hosts: the KIP-441 high-availability assignor, host by host.

Pure: the leader gathers members, changelog ranges and the previous model and calls
`place_on_hosts`; what comes out goes into the job model (`JobModel.hosts`, `standbys`,
`warmups`, and each task's worker id).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

import groupers as G
from framework.hosts.member import Member
from framework.metadata.jobmodel import JobModel

__all__ = ["RUNNING", "HostPlacement", "place_on_hosts", "restore_gaps", "worker_ids"]

RestoreRange = tuple[int, int]
"""A task's changelog partition as a restore reads it: (oldest retained, restore end)."""
RUNNING = -1
"""The offset a member gives for a store of a task its running workers process: its copy is
current (its worker holds it open, so it cannot be read; it is caught up by definition)."""


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
        """The model's ``workers``: one past the highest worker id (ids stay with their
        host across rebalances, so some below it may belong to no host)."""
        return max((w for ids in self.hosts.values() for w in ids), default=-1) + 1


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
                    position[1] == RUNNING):
                usable = True
            elif position is not None and position[0] == changelogs.get(task) and (
                    oldest <= position[1] <= end):
                gap += end - position[1]
                usable = True
            else:
                gap += end - oldest
        if usable:
            gaps[task] = gap
    return gaps


def worker_ids(members: Mapping[str, Member], previous: JobModel | None
               ) -> dict[str, tuple[int, ...]]:
    """Host → its worker ids: the ids it had in ``previous`` when its worker count is the
    same, else the lowest ids no host had in ``previous`` and none has now (in host name
    order) — so a host that missed a round (a long pause) finds its ids free again."""
    hosts: dict[str, tuple[int, ...]] = {}
    if previous is not None:
        for host in sorted(members):
            ids = previous.hosts.get(host, ())
            if ids and len(ids) == members[host].workers:
                hosts[host] = tuple(ids)
    used = {w for ids in hosts.values() for w in ids}
    if previous is not None:
        used |= {w for ids in previous.hosts.values() for w in ids}
    free = (w for w in itertools.count() if w not in used)
    for host in sorted(members):
        if host not in hosts:
            hosts[host] = tuple(next(free) for _ in range(members[host].workers))
    return dict(sorted(hosts.items()))


def place_on_hosts(
    members: Mapping[str, Member], changelogs: Mapping[str, int], previous: JobModel | None,
    ranges: Mapping[str, Mapping[str, RestoreRange]], *, stateful: bool, standbys: int,
    acceptable_recovery_lag: int, max_warmups: int,
) -> HostPlacement:
    """Place ``changelogs``' tasks on ``members`` (host name → member); a host's capacity is
    its workers. A host keeps its worker ids (`worker_ids`) and a task that stays on its
    host stays on its worker; the others go to the host's least loaded workers, in task
    order — so a rebalance changes nothing for a worker whose tasks all stay."""
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
    hosts = worker_ids(members, previous)
    workers: dict[str, int] = {}
    for host in sorted(members):
        ids = hosts[host]
        load = dict.fromkeys(ids, 0)
        moving = []
        for task in sorted(result.clients[host].active, key=G.task_sort_key):
            was_on = previous.tasks[task].worker if previous is not None and (
                task in previous.tasks) else None
            if was_on is not None and was_on in load:
                workers[task] = was_on
                load[was_on] += 1
            else:
                moving.append(task)
        for task in moving:
            worker = min(ids, key=lambda w: (load[w], w))
            workers[task] = worker
            load[worker] += 1
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
