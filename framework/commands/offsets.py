"""`sampan streams reset-offsets SYSTEM.STREAM --job JOB --to earliest|latest|OFFSET
[--partition P]`.

Sets where every task of a stopped job continues reading one input stream: its oldest
retained record (``earliest``), its end (``latest``), or, for one partition, an offset —
the remedy for an input that was deleted and created again (`framework.inputs_check`),
and for a record no task can decode (past it: its offset + 1). Stores keep their state.
"""

from __future__ import annotations

from dataclasses import replace

from framework.commands.stream_ref import check_input
from framework.config import JobConfig
from framework.coordinator.lease import CoordinatorLease, LeaseStore, pid_alive
from framework.errors import ConfigError, JobModelError, SampanError
from framework.metadata import read_state
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


async def reset_offsets(config: JobConfig, qualified: str, to: str,
                        partition: int | None = None
                        ) -> list[tuple[str, SystemStreamPartition, int | None, int]]:
    """Move every task's position on ``qualified`` (only on ``partition`` when given) to
    ``to`` — ``earliest``, ``latest`` or an offset of that partition; the changes, as
    (task, SSP, old position or None, new position)."""
    check_input(config, qualified)
    if to not in ("earliest", "latest") and not (to.isdigit() and partition is not None):
        raise ConfigError(f"--to {to}: expected earliest, latest, or an offset with "
                          f"--partition P (e.g. --partition 0 --to 8)")
    stream = config.stream(qualified)
    meta = open_system(config.system(config.metadata_system))
    source = meta if stream.system == meta.name else open_system(config.system(stream.system))
    await meta.start()
    await source.start()
    lease = None
    try:
        lease = await refuse_if_running(config, meta)
        model = (await read_state(meta, config)).model
        if model is None:
            raise JobModelError(f"job {config.name!r} has never run: nothing to reset (it "
                                f"reads every input from its oldest record at its first start)")
        ranges = await source.offsets(stream.stream)
        if partition is not None:
            ranges = {partition: _span(ranges, qualified, partition, to)}
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
                span = ranges.get(ssp.partition)
                target = 0 if span is None else (span.oldest if to == "earliest" else span.end
                                                 if to == "latest" else int(to))
                changes.append((task.name, ssp, inputs.get(ssp), target))
                inputs[ssp] = target
            written.append(replace(before, epoch=epoch, inputs=inputs))
        await meta.commit(CommitRequest(config.name, epoch, (), written))
        return changes
    finally:
        if lease is not None:
            await lease.release()
        if source is not meta:
            await source.close()
        await meta.close()


def _span(ranges: dict[int, OffsetRange], qualified: str, partition: int, to: str
          ) -> OffsetRange:
    """``partition``'s range; `ConfigError` when it does not exist or ``to`` (an offset)
    lies outside it."""
    span = ranges.get(partition)
    if span is None:
        raise ConfigError(f"--partition {partition}: {qualified} has partitions 0 to "
                          f"{len(ranges) - 1}")
    if to.isdigit() and not span.oldest <= int(to) <= span.end:
        raise ConfigError(f"--to {to}: partition {partition} of {qualified} holds offsets "
                          f"{span.oldest} to {span.end} (its end); pass one of them")
    return span


def describe(changes: list[tuple[str, SystemStreamPartition, int | None, int]]) -> str:
    """One line per partition moved, for the command's output."""
    return "\n".join(
        f"{task}: {ssp} {'-' if old is None else old} → {new}" for task, ssp, old, new in changes
    ) or "no task reads that stream"
