"""`sampan streams reset-offsets SYSTEM.STREAM --job JOB (--to earliest|latest|TIME |
--to-offset N) [--partition P]`.

Sets where every task of a stopped job continues reading one input stream: its oldest
retained record (``earliest``), its end (``latest``), its first record stamped at or after
a time, or, on one partition, an offset — the remedy for an input that was deleted and
created again (`framework.inputs_check`), and for a record no task can decode (past it:
its offset + 1). Stores keep their state. For a job that never ran, it sets where the
first run starts (instead of the stream's ``start_position``); like every checkpoint on
the local log, those positions hold retention until the job reads past them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from framework.commands.stream_ref import check_input
from framework.config import JobConfig, StartPosition
from framework.coordinator.builder import build_job_model
from framework.coordinator.lease import CoordinatorLease, LeaseStore, pid_alive
from framework.errors import ConfigError, SampanError, StreamNotFoundError
from framework.inputs_check import offsets_at
from framework.metadata import read_state
from framework.metadata.jobmodel import JobModel
from framework.systems import open_system
from framework.systems.base import Checkpoint, CommitRequest, OffsetRange, System
from groupers import SystemStreamPartition

__all__ = ["describe", "refuse_if_running", "reset_offsets"]


async def refuse_if_running(config: JobConfig, meta: System, action: str = "reset"
                            ) -> CoordinatorLease | None:
    """The job must be stopped: hold its lease (local log) meanwhile, and no worker of it
    may be alive (a worker outlives a killed coordinator until it notices its fence)."""
    lease = None
    if isinstance(meta, LeaseStore):
        lease = CoordinatorLease(meta, config.name, config.coordinator.lease_timeout_ms)
        await lease.acquire()  # `CoordinatorRunningError` names the running coordinator
    status = (await read_state(meta, config)).status
    workers = [pid for pid in status.worker_pids.values() if pid_alive(pid)]
    running = lease is None and status.state == "running" and pid_alive(
        status.coordinator_pid)
    if workers or running:
        if lease is not None:
            await lease.release()
        raise SampanError(
            f"job {config.name!r} is running (coordinator pid {status.coordinator_pid},"
            f" worker pids {workers}); stop it (Ctrl-C on `sampan run {config.path}`) and "
            f"{action} again")
    return lease


async def reset_offsets(config: JobConfig, qualified: str, to: StartPosition | int,
                        partition: int | None = None
                        ) -> list[tuple[str, SystemStreamPartition, int | None, int]]:
    """Move every task's position on ``qualified`` (only on ``partition`` when given) to
    ``to`` — a `StartPosition` (oldest, latest, a time) or an offset of ``partition``; the
    changes, as (task, SSP, old position or None, new position). A job that never ran gets
    the positions its first run starts from, for the tasks that run would build now."""
    check_input(config, qualified)
    if isinstance(to, int) and partition is None:
        raise ConfigError(f"--to-offset {to} needs --partition P: an offset belongs to one "
                          "partition (e.g. --partition 0 --to-offset 8)")
    stream = config.stream(qualified)
    names = {config.metadata_system, *(s.system for s in config.input_streams)}
    systems = {name: open_system(config.system(name)) for name in sorted(names)}
    lease = None
    try:
        for system in systems.values():
            await system.start()
        meta = systems[config.metadata_system]
        lease = await refuse_if_running(config, meta)
        model = (await read_state(meta, config)).model or await _first_model(config, systems)
        source = systems[stream.system]
        if isinstance(to, int):
            assert partition is not None
            _span(await source.offsets(stream.stream), qualified, partition, to)
            targets = {partition: to}
        else:
            targets = await offsets_at(source, stream.stream, to)
            if partition is not None:
                if partition not in targets:
                    raise ConfigError(f"--partition {partition}: {qualified} has partitions "
                                      f"0 to {len(targets) - 1}")
                targets = {partition: targets[partition]}
        epoch = await meta.fenced_epoch(config.name) or model.epoch
        checkpoints = await meta.read_checkpoints(config.name)
        changes = []
        written = []
        for task in model.ordered_tasks():
            mine = sorted(s for s in task.ssps | task.broadcast
                          if (s.system, s.stream) == (stream.system, stream.stream)
                          and partition in (None, s.partition))
            if not mine:
                continue
            before = checkpoints.get(task.name) or Checkpoint(task.name, epoch)
            inputs = dict(before.inputs)
            for ssp in mine:
                target = targets.get(ssp.partition, 0)
                changes.append((task.name, ssp, inputs.get(ssp), target))
                inputs[ssp] = target
            written.append(replace(before, epoch=epoch, inputs=inputs))
        await meta.commit(CommitRequest(config.name, epoch, (), written))
        return changes
    finally:
        if lease is not None:
            await lease.release()
        for system in systems.values():
            await system.close()


async def _first_model(config: JobConfig, systems: Mapping[str, System]) -> JobModel:
    """The job model a first `sampan run` would build now (its tasks and their input
    partitions); an input it would create counts its declared ``partitions``."""
    counts = {}
    for stream in config.input_streams:
        try:
            found = await systems[stream.system].partition_counts([stream.stream])
        except StreamNotFoundError:
            if stream.partitions is None:
                raise StreamNotFoundError(
                    f"input stream {stream.qualified} does not exist; create it with `sampan "
                    f"streams create {stream.qualified} --partitions N --job {config.path}` "
                    f"or set partitions = N in [streams.\"{stream.qualified}\"]") from None
            found = {stream.stream: stream.partitions}
        counts[stream.qualified] = found[stream.stream]
    return build_job_model(config, counts, None)


def _span(ranges: Mapping[int, OffsetRange], qualified: str, partition: int, offset: int
          ) -> OffsetRange:
    """``partition``'s range; `ConfigError` when it does not exist or ``offset`` lies
    outside it."""
    span = ranges.get(partition)
    if span is None:
        raise ConfigError(f"--partition {partition}: {qualified} has partitions 0 to "
                          f"{len(ranges) - 1}")
    if not span.oldest <= offset <= span.end:
        raise ConfigError(f"--to-offset {offset}: partition {partition} of {qualified} holds "
                          f"offsets {span.oldest} to {span.end} (its end); pass one of them")
    return span


def describe(changes: list[tuple[str, SystemStreamPartition, int | None, int]]) -> str:
    """One line per partition moved, for the command's output."""
    return "\n".join(
        f"{task}: {ssp} {'-' if old is None else old} → {new}" for task, ssp, old, new in changes
    ) or "no task reads that stream"
