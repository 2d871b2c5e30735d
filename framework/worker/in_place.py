"""Whether a running worker can take a newer job model without restarting (pure).

A worker takes a newer model in place when its coordinator published it so, from this
worker's epoch on (`JobModel.in_place_since`: never a model of another coordinator run,
so a zombie worker stays fenced), with the same configuration, the worker on the same
host, and every task it keeps with the same changelog partition and broadcast inputs, at
most gaining partitions (an expansion, or a hold released on a count its tasks map). Holds
placed or released change only where reads stop (`JobModel.read_limits`): a worker that
read past a new hold stops where it is (`framework.coordinator.holds.stops_at`). With
several hosts a model may also take tasks from this worker (an incremental rebalance
parks them: `framework.hosts.handover`) or give it tasks (the follow-up places them); one
host keeps its tasks on its workers. Anything else — a configuration edit — is taken by
a restart (the worker exits fenced and its supervisor starts it on the new model).
"""

from __future__ import annotations

from dataclasses import dataclass

from framework.metadata.jobmodel import JobModel
from groupers import SystemStreamPartition

__all__ = ["InPlaceChange", "in_place_change"]


@dataclass(frozen=True)
class InPlaceChange:
    """A newer model this worker takes in place, and the partitions its tasks gain."""

    model: JobModel
    gained: dict[str, frozenset[SystemStreamPartition]]
    """Task → the SSPs it reads from now on besides its old ones (tasks gaining none are
    left out: they go on untouched)."""
    added: tuple[str, ...] = ()
    """Tasks this worker runs from now on (their stores are opened and restored)."""
    dropped: tuple[str, ...] = ()
    """Tasks this worker lets go (committed, closed, their stores closed)."""


def in_place_change(current: JobModel, latest: JobModel | None, worker: int,
                    digest: str) -> InPlaceChange | str:
    """The change from ``current`` to ``latest`` for ``worker`` when it can be taken in
    place; otherwise why not (a phrase for the log)."""
    if latest is None or latest.epoch <= current.epoch:
        return "no newer job model was found"
    if latest.in_place_since is None or not latest.in_place_since <= current.epoch:
        return (f"epoch {latest.epoch} was published for workers to restart on"
                if latest.in_place_since is None else
                f"epoch {latest.epoch} may be taken in place from epoch "
                f"{latest.in_place_since} on, not from epoch {current.epoch}")
    if latest.config_digest != digest:
        return f"epoch {latest.epoch} was built from another version of the job file"
    if not latest.hosts and latest.workers != current.workers:
        return f"epoch {latest.epoch} runs {latest.workers} workers, not {current.workers}"
    if _host_of(current, worker) != _host_of(latest, worker):
        return f"epoch {latest.epoch} runs worker {worker} on another host"
    mine = {t.name: t for t in current.tasks_of(worker)}
    theirs = {t.name: t for t in latest.tasks_of(worker)}
    if set(mine) != set(theirs) and not (latest.hosts and current.hosts):
        moved = sorted(set(mine) ^ set(theirs))
        return f"epoch {latest.epoch} moves tasks {', '.join(moved)} to or from this worker"
    gained: dict[str, frozenset[SystemStreamPartition]] = {}
    for name, before in mine.items():
        after = theirs.get(name)
        if after is None:
            continue
        if (after.changelog_partition != before.changelog_partition
                or after.broadcast != before.broadcast or not before.ssps <= after.ssps):
            return f"epoch {latest.epoch} changes task {name} beyond adding partitions"
        if after.ssps != before.ssps:
            gained[name] = after.ssps - before.ssps
    added = tuple(t.name for t in latest.tasks_of(worker) if t.name not in mine)
    dropped = tuple(t.name for t in current.tasks_of(worker) if t.name not in theirs)
    return InPlaceChange(latest, gained, added, dropped)


def _host_of(model: JobModel, worker: int) -> str | None:
    """The host running ``worker`` (None in a one-host model)."""
    return next((h for h, ids in model.hosts.items() if worker in ids), None)
