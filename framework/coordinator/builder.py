"""Build the next job model from the config, partition counts and the previous model.

Pure apart from reading the config: the coordinator does all I/O and calls this.
"""

from __future__ import annotations

from collections.abc import Mapping

import groupers as G
from framework.config import JobConfig
from framework.jobmodel import JobModel, TaskModel
from groupers import SystemStreamPartition

__all__ = ["build_job_model", "make_grouper"]


def make_grouper(config: JobConfig) -> G.SspGrouper:
    """The SSP grouper the config asks for; fixed-task variants for stateful jobs."""
    fixed = config.expansion == "fixed-tasks" and config.stateful
    algorithm = config.expansion_algorithm()
    if config.grouper == "single":
        return G.AllSspToSingleTask()
    if config.grouper == "system-stream-partition":
        if fixed:
            return G.GroupBySystemStreamPartitionFixedTasks(expansion=algorithm)
        return G.GroupBySystemStreamPartition()
    if fixed:
        return G.GroupByPartitionFixedTasks(expansion=algorithm)
    return G.GroupByPartition()


def _ssps(streams: list[str], counts: Mapping[str, int]) -> list[SystemStreamPartition]:
    ssps = []
    for qualified in streams:
        system, _, stream = qualified.partition(".")
        ssps.extend(SystemStreamPartition(system, stream, p) for p in range(counts[qualified]))
    return ssps


def _changelog_partitions(
    tasks: list[str], previous: JobModel | None
) -> dict[str, int]:
    """Keep every known task's changelog partition forever; new tasks get fresh ones."""
    known = {t.name: t.changelog_partition for t in previous.tasks.values()} if previous else {}
    used = set(known.values())
    mapping = {}
    next_free = 0
    for task in tasks:
        if task in known:
            mapping[task] = known[task]
            continue
        while next_free in used:
            next_free += 1
        mapping[task] = next_free
        used.add(next_free)
    return mapping


def _placement(tasks: list[str], workers: int, previous: JobModel | None) -> dict[str, int]:
    """Task → worker: a task stays on its previous worker while that keeps loads within one."""
    quota_high = -(-len(tasks) // workers) if tasks else 0
    load = [0] * workers
    placed: dict[str, int] = {}
    for task in tasks:
        before = previous.tasks.get(task) if previous else None
        if before is not None and before.worker < workers and load[before.worker] < quota_high:
            placed[task] = before.worker
            load[before.worker] += 1
    for task in tasks:
        if task not in placed:
            worker = min(range(workers), key=lambda w: (load[w], w))
            placed[task] = worker
            load[worker] += 1
    return placed


def build_job_model(
    config: JobConfig,
    partition_counts: Mapping[str, int],
    previous: JobModel | None,
    *,
    now_ms: int = 0,
    reason: str = "",
) -> JobModel:
    """The next model (epoch = previous + 1); raises `groupers.ExpansionError` on refusal."""
    grouping = make_grouper(config).group(
        _ssps(list(config.inputs), partition_counts),
        previous.ssp_task_mapping() if previous else None,
    )
    tasks = list(grouping)
    broadcast = frozenset(_ssps(list(config.broadcast_inputs), partition_counts))
    changelogs = _changelog_partitions(tasks, previous)
    placement = _placement(tasks, config.workers, previous)
    models = {
        name: TaskModel(
            name=name,
            ssps=grouping[name],
            changelog_partition=changelogs[name],
            worker=placement[name],
            broadcast=broadcast,
        )
        for name in tasks
    }
    used = max(changelogs.values(), default=-1) + 1
    return JobModel(
        job=config.name,
        epoch=(previous.epoch + 1) if previous else 1,
        config_digest=config.digest,
        workers=config.workers,
        tasks=models,
        partition_counts=dict(partition_counts),
        changelog_partitions=max(used, previous.changelog_partitions if previous else 0),
        created_ms=now_ms,
        reason=reason,
    )
