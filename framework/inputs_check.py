"""Where a task starts reading its inputs, and inputs that went back in time: a
checkpoint beyond its partition's end.

When an input stream is deleted and created again (or truncated), its offsets restart at
0 while the job's checkpoints still say where the old stream was read to; reading on
from there would skip the new stream's first records without a word. The coordinator
and the workers refuse to run such a job and name the remedy, `sampan streams
reset-offsets`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from framework.config import JobConfig, StartPosition
from framework.errors import ConfigError, SampanError
from framework.metadata.jobmodel import TaskModel
from framework.systems.base import Checkpoint, OffsetRange, OffsetsByTime, System
from groupers import SystemStreamPartition

__all__ = ["InputRecreatedError", "OffsetsReader", "check_inputs", "offsets_at",
           "recreated_inputs", "start_positions"]

OffsetsReader = Callable[[str, str], Awaitable[Mapping[int, OffsetRange]]]
"""``(system, stream) → offset ranges per partition``: `System.offsets`, or a read shared
by the tasks of a worker's start (`framework.worker.start_offsets`)."""


class InputRecreatedError(SampanError):
    """A checkpoint lies beyond the end of its input partition; names the remedy."""


def recreated_inputs(
    checkpoints: Mapping[str, Checkpoint], ends: Mapping[SystemStreamPartition, int]
) -> list[tuple[str, SystemStreamPartition, int, int]]:
    """(task, SSP, checkpointed position, end) for every checkpoint past its partition's
    end, sorted; partitions not in ``ends`` are not judged."""
    found = []
    for task, checkpoint in sorted(checkpoints.items()):
        for ssp, position in sorted(checkpoint.inputs.items()):
            end = ends.get(ssp)
            if end is not None and position > end:
                found.append((task, ssp, position, end))
    return found


def check_inputs(job_file: Path, checkpoints: Mapping[str, Checkpoint],
                 ends: Mapping[SystemStreamPartition, int]) -> None:
    """Raise `InputRecreatedError` naming the first such input and the remedy."""
    found = recreated_inputs(checkpoints, ends)
    if not found:
        return
    task, ssp, position, end = found[0]
    stream = f"{ssp.system}.{ssp.stream}"
    more = f" (and {len(found) - 1} more partitions)" if len(found) > 1 else ""
    raise InputRecreatedError(
        f"input {stream} was deleted and created again, or truncated: task {task!r} has "
        f"read {ssp} up to offset {position}, but the partition now ends at {end}{more}; "
        f"reading on would skip its first records. Stop the job and choose where it "
        f"continues: `sampan streams reset-offsets {stream} --job {job_file} --to earliest` "
        f"(read everything the stream holds now) or `--to latest` (only what comes next)")


async def offsets_at(system: System, stream: str, start: StartPosition) -> dict[int, int]:
    """Per partition of ``stream``, the offset ``start`` names now: the oldest retained
    record, the end, or the first record stamped at or after its time (else the end)."""
    if start.timestamp_ms is not None:
        if not isinstance(system, OffsetsByTime):
            raise ConfigError(f"system {system.name!r} cannot find records by time, so "
                              f"{system.name}.{stream} cannot start at {start.describe()}; "
                              f"use \"oldest\" or \"latest\"")
        return await system.offsets_for_time(stream, start.timestamp_ms)
    ranges = await system.offsets(stream)
    return {p: span.oldest if start.kind == "oldest" else span.end
            for p, span in ranges.items()}


async def start_positions(
    config: JobConfig, systems: Mapping[str, System], task: TaskModel,
    checkpoint: Checkpoint | None,
    offsets: OffsetsReader | None = None,
) -> dict[SystemStreamPartition, int]:
    """Where ``task`` starts reading: its checkpointed positions. SSPs without one (a
    partition an expansion added, or a model published without the coordinator) start
    from their oldest offset: the coordinator wrote the job's start positions
    (`framework.coordinator.starts`) as checkpoints before its first model. A checkpoint
    past its partition's end is refused. ``offsets(system, stream)`` reads a stream's
    offsets (a worker's start shares one read among its tasks); the system's when None."""
    done = dict(checkpoint.inputs) if checkpoint else {}
    positions = {}
    ends: dict[SystemStreamPartition, int] = {}
    streams: dict[tuple[str, str], Mapping[int, OffsetRange]] = {}  # one read per stream
    for ssp in sorted(task.ssps | task.broadcast):
        ranges = streams.get((ssp.system, ssp.stream))
        if ranges is None:
            ranges = streams[ssp.system, ssp.stream] = await (
                offsets(ssp.system, ssp.stream) if offsets is not None
                else systems[ssp.system].offsets(ssp.stream))
        if ssp.partition in ranges:
            ends[ssp] = ranges[ssp.partition].end
        if ssp in done:
            positions[ssp] = done[ssp]
            continue
        positions[ssp] = ranges[ssp.partition].oldest if ssp.partition in ranges else 0
    if checkpoint is not None:
        check_inputs(config.path, {task.name: checkpoint}, ends)
    return positions
