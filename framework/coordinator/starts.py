"""A job's start positions: where it starts reading an input it has never read, fixed
when the input first appears in its job model.

Each input's `start_position` (oldest, latest or a time) is resolved to offsets and
written as the tasks' checkpoints before that model is published. So the job is a reader
of every partition from its first model on — retention on the local log keeps what it
has not read, started or stopped, committed or not — and a restart before its first
commit starts where the first run did, not at a later "latest". An input the job already
has checkpoints on keeps them (`sampan streams reset-offsets` moves them, also before
the first run); a partition an expansion adds has none and is read from its first record
(`framework.inputs_check.start_positions`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace

from framework.config import JobConfig, StreamRef
from framework.inputs_check import offsets_at
from framework.metadata.jobmodel import JobModel
from framework.systems.base import Checkpoint, CommitRequest, System
from groupers import SystemStreamPartition

__all__ = ["new_inputs", "write_start_positions"]

log = logging.getLogger(__name__)


def new_inputs(config: JobConfig, previous: JobModel | None,
               checkpoints: Mapping[str, Checkpoint]) -> list[str]:
    """The inputs (``"system.stream"``) that get start positions with the next model:
    those not in ``previous`` (every input of a first model) that no checkpoint of the
    job mentions."""
    read = {StreamRef(s.system, s.stream) for cp in checkpoints.values() for s in cp.inputs}
    return [qualified for qualified in (*config.inputs, *config.broadcast_inputs)
            if (previous is None or qualified not in previous.partition_counts)
            and StreamRef.parse(qualified) not in read]


async def write_start_positions(
    config: JobConfig, systems: Mapping[str, System], model: JobModel,
    previous: JobModel | None, checkpoints: Mapping[str, Checkpoint],
) -> dict[SystemStreamPartition, int]:
    """Resolve the start of every `new_inputs` stream and write it into the checkpoints of
    ``model``'s tasks (before ``model`` is published); what was written."""
    streams = new_inputs(config, previous, checkpoints)
    if not streams:
        return {}
    meta = systems[config.metadata_system]
    starts: dict[SystemStreamPartition, int] = {}
    for qualified in streams:
        stream = config.stream(qualified)
        offsets = await offsets_at(systems[stream.system], stream.stream, stream.start)
        starts.update({SystemStreamPartition(stream.system, stream.stream, p): offset
                       for p, offset in offsets.items()})
        log.info("job %r starts reading %s at its %s: %s", config.name, qualified,
                 "time " + stream.start.describe() if stream.start.timestamp_ms is not None
                 else f"{stream.start.kind} offsets",
                 ", ".join(f"partition {p} offset {o}" for p, o in sorted(offsets.items())))
    epoch = await meta.fenced_epoch(config.name) or model.epoch
    written = []
    for task in model.ordered_tasks():
        mine = {ssp: starts[ssp] for ssp in sorted(task.ssps | task.broadcast) if ssp in starts}
        if mine:
            before = checkpoints.get(task.name) or Checkpoint(task.name, epoch)
            written.append(replace(before, epoch=epoch, inputs={**before.inputs, **mine}))
    await meta.commit(CommitRequest(config.name, epoch, (), written))
    return starts
