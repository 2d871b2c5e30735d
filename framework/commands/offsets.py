"""`sampan streams reset-offsets SYSTEM.STREAM --job JOB --to earliest|latest`.

Sets where every task of a stopped job continues reading one input stream: its oldest
retained record (``earliest``) or its end (``latest``). The remedy for an input that was
deleted and created again (`framework.inputs_check`); stores keep their state.
"""

from __future__ import annotations

from dataclasses import replace

from framework.config import JobConfig
from framework.coordinator.lease import CoordinatorLease, LeaseStore, pid_alive
from framework.errors import ConfigError, JobModelError, SampanError
from framework.metadata import read_state
from framework.systems import open_system
from framework.systems.base import Checkpoint, CommitRequest, System
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


async def reset_offsets(config: JobConfig, qualified: str, to: str
                        ) -> list[tuple[str, SystemStreamPartition, int | None, int]]:
    """Move every task's position on ``qualified`` to ``to``; the changes, as (task, SSP,
    old position or None, new position)."""
    if qualified not in (*config.inputs, *config.broadcast_inputs):
        raise ConfigError(f"{qualified} is not an input of job {config.name!r} (inputs: "
                          f"{', '.join((*config.inputs, *config.broadcast_inputs))})")
    if to not in ("earliest", "latest"):
        raise ConfigError(f"--to {to}: expected earliest or latest")
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
        epoch = await meta.fenced_epoch(config.name) or model.epoch
        checkpoints = await meta.read_checkpoints(config.name)
        changes = []
        written = []
        for task in model.ordered_tasks():
            mine = sorted(s for s in task.ssps | task.broadcast
                          if (s.system, s.stream) == (stream.system, stream.stream))
            if not mine:
                continue
            before = checkpoints.get(task.name) or Checkpoint(task.name, epoch)
            inputs = dict(before.inputs)
            for ssp in mine:
                span = ranges.get(ssp.partition)
                target = 0 if span is None else (span.oldest if to == "earliest" else span.end)
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


def describe(changes: list[tuple[str, SystemStreamPartition, int | None, int]]) -> str:
    """One line per partition moved, for the command's output."""
    return "\n".join(
        f"{task}: {ssp} {'-' if old is None else old} → {new}" for task, ssp, old, new in changes
    ) or "no task reads that stream"
