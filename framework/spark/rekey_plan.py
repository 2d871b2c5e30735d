"""The pure part of an offline re-key: validate M, build the M-task job model, carry checkpoints.

No Spark and no I/O here, so every refusal and every carried offset is testable as a
table. Task ``"Partition i"`` of M owns the input partitions ``p`` with ``p % M == i`` —
what `GroupByPartitionFixedTasks` gives a job started with M tasks — and a key's task is
``partition_for_key(key, count) % M``, the task owning the key's input partition.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from framework.config import JobConfig, StreamRef
from framework.coordinator.builder import build_rekeyed_model
from framework.coordinator.holds import Held
from framework.coordinator.lease import pid_alive
from framework.metadata import CoordinatorStatus
from framework.metadata.jobmodel import JobModel
from framework.partitioner import partition_for_key
from framework.spark.errors import RekeyError
from framework.systems.base import Checkpoint
from groupers import SystemStreamPartition

__all__ = ["RekeyPlan", "carry_checkpoints", "check_stopped", "plan_rekey", "task_of_key",
           "valid_task_counts"]


def task_of_key(key: bytes, partition_count: int, tasks: int) -> int:
    """The task (of ``tasks``) owning the input partition of ``key``.

    >>> task_of_key(b"user-1", 8, 4)
    0
    """
    return partition_for_key(key, partition_count) % tasks


def valid_task_counts(partition_counts: Mapping[str, int]) -> list[int]:
    """Task counts dividing every input's partition count (M = the counts' common divisors).

    >>> valid_task_counts({"local.a": 8, "local.b": 12})
    [1, 2, 4]
    """
    common = math.gcd(*partition_counts.values()) if partition_counts else 1
    return [m for m in range(1, common + 1) if common % m == 0]


def check_stopped(config: JobConfig, status: CoordinatorStatus) -> None:
    """Refuse when the coordinator stream says the job runs and a process of it is alive."""
    worker_pids = list(status.worker_pids.values())
    coordinator = status.coordinator_pid
    running = status.state == "running" and coordinator and pid_alive(coordinator)
    live_workers = [pid for pid in worker_pids if pid_alive(pid)]
    if running or live_workers:
        raise RekeyError(
            f"job {config.name!r} is running (coordinator pid {coordinator}, worker pids "
            f"{live_workers or worker_pids}); stop it (Ctrl-C on `sampan run "
            f"{config.path}`) before re-keying")


@dataclass(frozen=True)
class RekeyPlan:
    """The M-task model and the changelog partitions its tasks write from now on."""

    model: JobModel
    first_changelog_partition: int
    old_changelog_partitions: tuple[int, ...]
    tasks: int

    def new_changelog_partition(self, task: int) -> int:
        return self.first_changelog_partition + task


def _held_count(config: JobConfig, qualified: str, held: Held, tasks: int,
                read: Mapping[SystemStreamPartition, int]) -> int:
    """The count a held input is re-keyed at (`Held.rekey_counts`), once every record
    before its hold was read."""
    found = held.rekey_counts()
    if found is None:
        raise RekeyError(
            f"input {qualified} is held ({held.change}) and the records written past its "
            f"hold were written under counts a re-key cannot keep in order per key; release "
            f"it with `sampan streams discard-held {qualified} --job {config.path}` (skips "
            f"those records) instead")
    count, valid = found
    if tasks not in valid:
        raise RekeyError(
            f"--tasks {tasks}: input {qualified} is held ({held.change}) and its records "
            f"past the hold were written for {count} partitions; a task count that keeps "
            f"them exact divides {count}: valid task counts: {list(valid)}")
    system, stream = StreamRef.parse(qualified)
    behind = sorted(p for p, end in held.hold.ends.items()
                    if read.get(SystemStreamPartition(system, stream, p), 0) < end)
    if behind:
        raise RekeyError(
            f"input {qualified} is held at {held.hold.count} partitions while records written "
            f"before the hold are still unread in partitions {behind}; run the job until it "
            f"caught up (it reads {qualified} up to the hold), stop it, then re-key")
    return count


def _check_model(config: JobConfig, model: JobModel, counts: Mapping[str, int],
                 checkpoints: Mapping[str, Checkpoint], tasks: int,
                 held: Mapping[str, Held]) -> dict[str, int]:
    """The input counts of the re-keyed model; raises `RekeyError` naming what is wrong."""
    if config.grouper != "partition":
        raise RekeyError(
            f'job.grouper = "{config.grouper}" in {config.path}: re-key supports the '
            '"partition" grouper (tasks "Partition i") only')
    known = {q: model.partition_counts[q] for q in config.inputs}
    read = {ssp: position for cp in checkpoints.values() for ssp, position in cp.inputs.items()}
    inputs = dict(counts)
    for qualified, count in sorted(counts.items()):
        if qualified in held:
            inputs[qualified] = _held_count(config, qualified, held[qualified], tasks, read)
        elif qualified in known and known[qualified] != count:
            raise RekeyError(
                f"input {qualified} has {count} partitions but the job model of epoch "
                f"{model.epoch} has {known[qualified]}; run the job once (`sampan run "
                f"{config.path}`) so it adopts the expansion (or holds the input), stop it, "
                f"then re-key")
    for qualified, count in sorted(inputs.items()):
        if tasks < 1 or count % tasks:
            raise RekeyError(
                f"--tasks {tasks} does not divide the {count} partitions of input {qualified}:"
                f" every key of a task must stay co-partitioned; valid task counts: "
                f"{valid_task_counts(inputs)}")
    for task in model.ordered_tasks():
        done = checkpoints[task.name].inputs if task.name in checkpoints else {}
        if task.pending_stages(done):
            raise RekeyError(
                f"task {task.name!r} has not passed its expansion barrier yet (it still "
                f"has records from before the expansion to process); run the job until "
                f"it caught up, stop it, then re-key")
    return inputs


def plan_rekey(config: JobConfig, model: JobModel, counts: Mapping[str, int],
               checkpoints: Mapping[str, Checkpoint], tasks: int,
               changelog_partitions_now: int, now_ms: int = 0,
               held: Mapping[str, Held] | None = None) -> RekeyPlan:
    """The M-task model of epoch ``model.epoch + 1``; changelog partitions past every one
    used so far (``changelog_partitions_now`` is the changelog streams' current count).

    ``held``: the inputs the model holds (`framework.coordinator.holds`). Once every record
    before its hold was read, the new model reads a held input at the first count with
    records past the hold (the coordinator then expands it to the count now) and holds
    nothing: the remedy of a refused partition change that keeps every record."""
    inputs = _check_model(config, model, counts, checkpoints, tasks, held or {})
    first = max(model.changelog_partitions, changelog_partitions_now)
    new_model = build_rekeyed_model(config, inputs, model, tasks, first, now_ms=now_ms)
    old = tuple(sorted({t.changelog_partition for t in model.tasks.values()}))
    return RekeyPlan(new_model, first, old, tasks)


def carry_checkpoints(plan: RekeyPlan, old: JobModel, checkpoints: Mapping[str, Checkpoint],
                      changelog_ends: Mapping[str, Mapping[int, int]]) -> list[Checkpoint]:
    """Each new task's checkpoint: its SSPs' positions from the old tasks that owned them
    (broadcast SSPs: the least position any old task reached) and, per store, the end of
    its fresh changelog partition."""
    positions: dict[SystemStreamPartition, int] = {}
    broadcast: dict[SystemStreamPartition, int] = {}
    for task in old.tasks.values():
        checkpoint = checkpoints.get(task.name)
        if checkpoint is None:
            continue
        for ssp, offset in checkpoint.inputs.items():
            if ssp in task.ssps:
                positions[ssp] = offset
            elif ssp in task.broadcast:
                broadcast[ssp] = min(offset, broadcast.get(ssp, offset))
    carried = []
    for task in plan.model.ordered_tasks():
        inputs = {s: positions[s] for s in sorted(task.ssps) if s in positions}
        inputs.update({s: broadcast[s] for s in sorted(task.broadcast) if s in broadcast})
        partition = task.changelog_partition
        carried.append(Checkpoint(
            task=task.name, epoch=plan.model.epoch, inputs=inputs,
            changelogs={store: ends.get(partition, 0) for store, ends in changelog_ends.items()}))
    return carried
