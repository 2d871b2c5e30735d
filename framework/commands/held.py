"""`sampan streams discard-held SYSTEM.STREAM --job JOB`: release a held input by skipping
the records its tasks could not map.

An input is held (`framework.coordinator.holds`) once records were written to it while
its partition count was one its tasks cannot map: those records were placed for that
count, so no task owns their keys. With the job stopped and caught up to the hold, this
command moves every task of the job past them — on the local log, every record from the
hold up to where the stream last grew past an unmappable count (records written under a
count in between are skipped too: they lie before the last ones in their partitions); on
Kafka, which keeps no growth record, every record past the hold — and publishes the next
job model at the stream's count now (which its tasks must map), with expansion barriers
as usual. The records stay in the stream; only this job skips them. `sampan rekey` is the
remedy that keeps them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from framework.commands.offsets import refuse_if_running
from framework.config import JobConfig
from framework.coordinator.builder import build_job_model
from framework.coordinator.holds import (
    Held,
    InputNow,
    input_now,
    plan_holds,
    read_positions,
    stops_at,
)
from framework.errors import ConfigError, SampanError
from framework.metadata import publish_model, publish_status, read_state
from framework.metadata.jobmodel import JobModel
from framework.systems import open_system
from framework.systems.base import Checkpoint, CommitRequest
from framework.wording import counted
from groupers import SystemStreamPartition

__all__ = ["Discarded", "discard_held"]


@dataclass(frozen=True)
class Discarded:
    """What `discard_held` skipped: per partition the offsets ``[first, end)``."""

    stream: str
    ranges: dict[int, tuple[int, int]]
    change: str
    epoch: int
    count: int

    @property
    def records(self) -> int:
        return sum(end - first for first, end in self.ranges.values())

    def text(self, job: str) -> str:
        parts = "; ".join(f"partition {p} offsets {first}..{end - 1}"
                          for p, (first, end) in sorted(self.ranges.items()) if end > first)
        return (f"discarded {counted(self.records, 'record')} of {self.stream} "
                f"({self.change}): {parts or 'none'}. The job skips them; they stay in the "
                f"stream. It reads {self.stream} at {counted(self.count, 'partition')} from "
                f"epoch {self.epoch} on: start it with `sampan run {job}`")


def _discard_to(held: Held, now: InputNow) -> dict[int, int]:
    """Per partition, the offset the skipped records end at: where the stream last grew
    past an unmappable count (local log), else its end now."""
    if now.grown is None or not held.recorded:
        return dict(now.ends)
    last = max(g.count for g in held.growths[:-1] if g.error)
    return dict(now.grown[last])


def _check_caught_up(config: JobConfig, qualified: str, model: JobModel, held: Held,
                     checkpoints: dict[str, Checkpoint]) -> None:
    ref = config.stream(qualified)
    for task in model.ordered_tasks():
        done = checkpoints[task.name].inputs if task.name in checkpoints else {}
        for ssp in sorted(task.ssps):
            if (ssp.system, ssp.stream) != (ref.system, ref.stream):
                continue
            end = held.hold.ends.get(ssp.partition, 0)
            if done.get(ssp, 0) < end:
                raise SampanError(
                    f"task {task.name!r} has read {ssp} up to offset {done.get(ssp, 0)}, "
                    f"short of the hold at {end}: the records before the hold are not "
                    f"discarded, so run the job (`sampan run {config.path}`) until it read "
                    f"{qualified} up to the hold (`sampan status` shows its lag), stop it, "
                    f"then discard")


async def discard_held(config: JobConfig, qualified: str) -> Discarded:
    """Skip the records that hold ``qualified`` for the stopped job and release it."""
    if qualified not in config.inputs:
        raise ConfigError(f"{qualified} is not an input of job {config.name!r} (inputs: "
                          f"{', '.join(config.inputs)})")
    stream = config.stream(qualified)
    meta = open_system(config.system(config.metadata_system))
    source = meta if stream.system == meta.name else open_system(config.system(stream.system))
    await meta.start()
    await source.start()
    lease = None
    try:
        lease = await refuse_if_running(config, meta, "discard")
        state = await read_state(meta, config)
        model = state.model
        if model is None or qualified not in model.holds:
            raise SampanError(f"{qualified} is not held by job {config.name!r}: nothing to "
                              f"discard (`sampan status {config.path}` names a held input)")
        now = await input_now(source, stream.stream)
        counts = {**model.partition_counts, qualified: now.count}
        checkpoints = await meta.read_checkpoints(config.name)
        read = read_positions(checkpoints.values())
        plan = plan_holds(config, model, counts, {qualified: now}, read=read)
        held = plan.held.get(qualified)
        if held is None:
            raise SampanError(f"{qualified} is no longer held: nothing was written under a "
                              f"count job {config.name!r} cannot map, so `sampan run "
                              f"{config.path}` releases it")
        if held.growths[-1].error:
            raise SampanError(
                f"{qualified} has {now.count} partitions, which its {held.tasks} tasks cannot "
                f"map: grow it first to a count they map (`sampan streams expand {qualified} "
                f"--partitions N --job {config.path}`, N a multiple of {held.tasks}), then "
                f"discard (records written before that are discarded too)")
        _check_caught_up(config, qualified, model, held, checkpoints)
        skip_to = _discard_to(held, now)
        ends = {SystemStreamPartition(stream.system, stream.stream, p): end
                for p, end in now.ends.items()}  # the barrier of the tasks that gain some
        released = {s: h for s, h in model.holds.items() if s != qualified}
        next_model = build_job_model(
            config, {**model.partition_counts, qualified: now.count}, model,
            now_ms=int(time.time() * 1000), reason=f"discard-held {held.change}",
            end_offsets=ends, checkpoints=checkpoints, holds=released)
        fenced = await meta.fenced_epoch(config.name)
        if fenced is not None and fenced >= next_model.epoch:
            next_model = replace(next_model, epoch=fenced + 1)
        await meta.fence(config.name, next_model.epoch)
        written = []
        for task in next_model.ordered_tasks():
            before = checkpoints.get(task.name) or Checkpoint(task.name, next_model.epoch)
            inputs = dict(before.inputs)
            for ssp in task.ssps:
                if (ssp.system, ssp.stream) == (stream.system, stream.stream) and (
                        ssp.partition in skip_to):
                    inputs[ssp] = max(inputs.get(ssp, 0), skip_to[ssp.partition])
            written.append(replace(before, epoch=next_model.epoch, inputs=inputs))
        await meta.commit(CommitRequest(config.name, next_model.epoch, (), written))
        await publish_model(meta, config, next_model, fenced=True)
        if not released and state.status.refusal is not None:
            await publish_status(meta, config, replace(state.status, refusal=None))
        first = held.hold.ends if held.hold.exact else stops_at(qualified, held.hold, read)
        return Discarded(
            qualified, {p: (first.get(p, 0), max(first.get(p, 0), end)) for p, end in sorted(
                skip_to.items())}, held.change, next_model.epoch, now.count)
    finally:
        if lease is not None:
            await lease.release()
        if source is not meta:
            await source.close()
        await meta.close()
