"""Build the next job model from the config, partition counts and the previous model.

Pure apart from reading the config: the model service (`framework.coordinator.model_service`)
does all I/O and calls this once per model it publishes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import groupers as G
from framework.config import JobConfig, StreamRef
from framework.coordinator.expansion import barrier_stages, merging_stages
from framework.coordinator.grouping import make_grouper
from framework.metadata.jobmodel import BarrierStage, JobModel, StreamHold, TaskModel
from framework.systems.base import Checkpoint
from groupers import SystemStreamPartition

__all__ = ["build_job_model", "build_rekeyed_model", "make_grouper"]


def _ssps(streams: list[str], counts: Mapping[str, int]) -> list[SystemStreamPartition]:
    ssps: list[SystemStreamPartition] = []
    for qualified in streams:
        system, stream = StreamRef.parse(qualified)
        ssps.extend(SystemStreamPartition(system, stream, p) for p in range(counts[qualified]))
    return ssps


def _changelog_partitions(
    tasks: list[str], previous: JobModel | None
) -> dict[str, int]:
    """Keep every known task's changelog partition forever; new tasks get fresh ones.

    Fresh means never used by any earlier model: numbers below the previous model's
    ``changelog_partitions`` may hold a retired task's records (e.g. after `sampan rekey`).
    """
    known = {t.name: t.changelog_partition for t in previous.tasks.values()} if previous else {}
    used = set(known.values())
    mapping = {}
    next_free = previous.changelog_partitions if previous else 0
    for task in tasks:
        if task in known:
            mapping[task] = known[task]
            continue
        while next_free in used:
            next_free += 1
        mapping[task] = next_free
        used.add(next_free)
    return mapping


def _placement(
    config: JobConfig, changelogs: Mapping[str, int], previous: JobModel | None,
    local_state: Mapping[int, Mapping[str, int]] | None = None,
) -> dict[str, int]:
    """Task → worker through a `groupers` assignor; sticky so restarts move nothing.

    Tasks are presented to the assignor as partitions of one pseudo-topic, numbered by
    their changelog partition (stable for a task's whole life).
    """
    workers = [f"worker-{w}" for w in range(config.workers)]
    by_number = {number: task for task, number in changelogs.items()}
    before: dict[str, set[int]] = {w: set() for w in workers}
    if previous:
        for task in previous.tasks.values():
            if task.name in changelogs and f"worker-{task.worker}" in before:
                before[f"worker-{task.worker}"].add(changelogs[task.name])
    if config.coordinator.assignor == "high-availability":
        stateful = config.stateful

        assignor = G.HighAvailabilityTaskAssignor()

        def client(worker: str) -> G.ClientState:
            """Restore gaps the worker reported; without reports, its previous tasks at 0.

            With reports, a previous task counts as the worker's own (gap 0 to the
            assignor) only while its reported gap is acceptable: state it lost or that fell
            far behind does not pin the task to it.
            """
            previous_tasks = {by_number[n] for n in before[worker]}
            if local_state is None:
                return G.ClientState(previous_active=previous_tasks,
                                     task_lags={t: 0 for t in previous_tasks})
            reported = local_state.get(int(worker.split("-")[1]), {})
            lags = {t: gap for t, gap in reported.items() if t in changelogs}
            kept = {t for t in previous_tasks
                    if t in lags and lags[t] <= assignor.acceptable_recovery_lag}
            return G.ClientState(previous_active=kept, task_lags=lags)

        result = assignor.assign({task: stateful for task in changelogs},
                                 {w: client(w) for w in workers})
        return {task: int(w.split("-")[1]) for w, a in result.clients.items()
                for task in a.active}
    # One pseudo-topic per task numbering; counts cover the highest changelog partition.
    count = max(changelogs.values(), default=-1) + 1
    subscriptions = {
        w: G.Subscription(["tasks"], owned={G.TopicPartition("tasks", n) for n in before[w]},
                          generation=previous.epoch if previous else -1)
        for w in workers}
    assigned = G.StickyAssignor().assign({"tasks": count}, subscriptions)
    placement = {}
    for worker, partitions in assigned.items():
        for tp in partitions:
            if tp.partition in by_number:
                placement[by_number[tp.partition]] = int(worker.split("-")[1])
    return placement


def build_job_model(
    config: JobConfig,
    partition_counts: Mapping[str, int],
    previous: JobModel | None,
    *,
    now_ms: int = 0,
    reason: str = "",
    end_offsets: Mapping[SystemStreamPartition, int] | None = None,
    checkpoints: Mapping[str, Checkpoint] | None = None,
    local_state: Mapping[int, Mapping[str, int]] | None = None,
    placement: Callable[[Mapping[str, int]], Mapping[str, int]] | None = None,
    holds: Mapping[str, StreamHold] | None = None,
) -> JobModel:
    """The next model (epoch = previous + 1); raises `groupers.ExpansionError` on refusal.

    ``end_offsets`` (input SSP → end offset now) set the barriers of tasks that gain
    partitions; ``checkpoints`` tell which earlier barriers were already passed.
    ``local_state`` (worker → task → restore gap, absent = no local copy) steers the
    high-availability assignor's placement toward workers that already hold a task's state.
    ``placement`` (task → changelog partition in, task → worker out) replaces the one-host
    placement: `framework.hosts` places tasks over several hosts with it. ``holds`` are the
    new model's held inputs (`framework.coordinator.holds`); None keeps the previous ones.
    """
    grouping = make_grouper(config).group(
        _ssps(list(config.inputs), partition_counts),
        previous.ssp_task_mapping() if previous else None,
        previous_counts=previous.partition_counts if previous else None,
    )
    tasks = list(grouping)
    changelogs = _changelog_partitions(tasks, previous)
    barriers = config.stateful and config.expansion == "fixed-tasks"
    checkpoint = (checkpoints or {}).get
    stages = {name: barrier_stages(name, grouping[name], previous, end_offsets or {},
                                   checkpoint(name), now_ms) if barriers else ()
              for name in tasks}
    merging = {name: merging_stages(name, previous, checkpoint(name), now_ms,
                                    config.expansion_merge_ms) if barriers else ()
               for name in tasks}
    return _model(config, partition_counts, previous, grouping, changelogs,
                  placement(changelogs) if placement else
                  _placement(config, changelogs, previous, local_state), stages,
                  now_ms=now_ms, reason=reason, merging=merging,
                  holds=(previous.holds if previous else {}) if holds is None else holds)


def build_rekeyed_model(
    config: JobConfig,
    partition_counts: Mapping[str, int],
    previous: JobModel,
    tasks: int,
    first_changelog_partition: int,
    *,
    now_ms: int = 0,
) -> JobModel:
    """The model of an offline re-key (`sampan rekey`) to ``tasks`` tasks: ``Partition i``
    owns every input partition ``p`` with ``p % tasks == i`` and writes a fresh changelog
    partition ``first_changelog_partition + i`` (never one an earlier task used)."""
    grouping = {
        f"Partition {i}": frozenset(s for s in _ssps(list(config.inputs), partition_counts)
                                    if s.partition % tasks == i)
        for i in range(tasks)}
    changelogs = {name: first_changelog_partition + i for i, name in enumerate(grouping)}
    return _model(config, {**previous.partition_counts, **partition_counts}, previous,
                  grouping, changelogs, _placement(config, changelogs, None),
                  {name: () for name in grouping}, now_ms=now_ms,
                  reason=f"rekey {len(previous.tasks)} → {tasks} tasks")


def _model(
    config: JobConfig,
    partition_counts: Mapping[str, int],
    previous: JobModel | None,
    grouping: Mapping[str, frozenset[SystemStreamPartition]],
    changelogs: Mapping[str, int],
    placement: Mapping[str, int],
    stages: Mapping[str, tuple[BarrierStage, ...]],
    *,
    now_ms: int,
    reason: str,
    holds: Mapping[str, StreamHold] | None = None,
    merging: Mapping[str, tuple[BarrierStage, ...]] | None = None,
) -> JobModel:
    """Assemble the next model (epoch = previous + 1) from its decided parts."""
    broadcast = frozenset(_ssps(list(config.broadcast_inputs), partition_counts))
    models = {
        name: TaskModel(name=name, ssps=grouping[name], changelog_partition=changelogs[name],
                        worker=placement[name], broadcast=broadcast, stages=stages[name],
                        merging=(merging or {}).get(name, ()))
        for name in grouping
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
        holds=dict(holds or {}),
    )
