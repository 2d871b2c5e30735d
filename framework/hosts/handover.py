"""Incremental rebalancing: a task changes host in two models, never running on two hosts.

The leader's target placement (`placement.place_on_hosts`) is published in two steps. The
first model (`first_model`) is the target with every task that changes host *parked*: it
runs nowhere (`JobModel.parked`: task → the host releasing it). Every worker takes it in
place (`framework.worker.in_place`): tasks that stay never stop, a worker whose task is
parked commits it and closes its stores. Once every host and every worker of a releasing
host reported the first model's epoch (`pending_releases`), the leader
publishes the target itself (the follow-up model) and the new owners add the tasks —
Kafka Streams' follow-up rebalance of KIP-429, told through the coordinator stream
instead of another group round. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace

from framework.metadata import HostReport, WorkerReport
from framework.metadata.jobmodel import PARKED, JobModel

__all__ = ["first_model", "pending_releases", "previous_host"]


def previous_host(previous: JobModel, task: str) -> str | None:
    """The host ``task`` ran on (or was being released by) in ``previous``."""
    if task in previous.parked:
        return previous.parked[task]
    return previous.host_of(task) if task in previous.tasks else None


def first_model(previous: JobModel | None, target: JobModel, members: Collection[str]
                ) -> JobModel | None:
    """``target`` with the tasks that change host parked — None when no task moves away
    from a host that is still a member (then ``target`` is published at once: a task of a
    host that left or failed has nobody to release it)."""
    if previous is None:
        return None
    parked: dict[str, str] = {}
    for name in target.tasks:
        before = previous_host(previous, name)
        if before is not None and before in members and before != target.host_of(name):
            parked[name] = before
    if not parked:
        return None
    tasks = {name: replace(task, worker=PARKED) if name in parked else task
             for name, task in target.tasks.items()}

    def without(copies: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        """No copy of a parked task on its old host (its worker still holds the stores
        until it lets go) or on its new one (its worker opens them next)."""
        kept = {}
        for task, hosts in copies.items():
            if task in parked:
                hosts = tuple(h for h in hosts if h != parked[task]
                              and h != target.host_of(task))
            if hosts:
                kept[task] = hosts
        return kept

    return replace(target, tasks=tasks, parked=dict(sorted(parked.items())),
                   standbys=without(target.standbys), warmups=without(target.warmups),
                   reason=f"{target.reason}; first step: {len(parked)} task(s) released")


def pending_releases(first: JobModel, workers: Mapping[int, WorkerReport],
                     hosts: Mapping[str, HostReport]) -> list[str]:
    """What the follow-up waits for (empty: every parked task was let go): every host must
    have applied ``first`` (a releasing host stops the workers it no longer runs, a
    receiving one closes its replicas of the parked tasks, before it reports), and each
    worker of a releasing host must have taken it (a worker reports the epoch it took once
    its parked tasks are committed and closed)."""
    waiting = []
    releasing = set(first.parked.values())
    for host in sorted(first.hosts):
        report = hosts.get(host)
        if report is None or (report.epoch or 0) < first.epoch:
            waiting.append(f"host {host}")
        if host not in releasing:
            continue
        for worker in first.hosts[host]:
            seen = workers.get(worker)
            if seen is None or seen.epoch < first.epoch or seen.resumed_ms is None:
                waiting.append(f"worker {worker} of host {host}")
    return waiting
