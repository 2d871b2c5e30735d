"""The coordinator stream: a compacted one-partition stream holding a job's job models.

It is the job's memory across restarts: the latest model gives the SSP → task history
and the task → changelog partition mapping the next model must keep.
"""

from __future__ import annotations

from framework.config import JobConfig
from framework.jobmodel import JobModel
from framework.systems.base import ProducerRecord, System
from framework.systems.reading import read_range
from groupers import SystemStreamPartition

MODEL_KEY = b"job-model"


def _coordinator_ssp(config: JobConfig) -> SystemStreamPartition:
    system, _, stream = config.coordinator_stream.partition(".")
    return SystemStreamPartition(system, stream, 0)


async def ensure_coordinator_stream(system: System, config: JobConfig) -> None:
    """Create the coordinator stream (1 partition, compacted) if it is missing."""
    ssp = _coordinator_ssp(config)
    await system.create_stream(ssp.stream, 1, compacted=True, exist_ok=True)


async def publish_model(system: System, config: JobConfig, model: JobModel) -> None:
    """Write ``model`` to the coordinator stream, then fence older epochs out."""
    ssp = _coordinator_ssp(config)
    await ensure_coordinator_stream(system, config)
    await system.produce([ProducerRecord(ssp.stream, MODEL_KEY, model.to_bytes(), partition=0)])
    await system.fence(config.name, model.epoch)


async def read_latest_model(system: System, config: JobConfig) -> JobModel | None:
    """The newest job model in the coordinator stream, or None if there is none yet."""
    ssp = _coordinator_ssp(config)
    streams = await system.list_streams()
    if ssp.stream not in streams:
        return None
    offsets = (await system.offsets(ssp.stream))[0]
    latest: bytes | None = None
    async for batch in read_range(system, ssp, offsets.oldest, offsets.end):
        for record in batch:
            if record.key == MODEL_KEY and record.value is not None:
                latest = record.value
    return JobModel.from_bytes(latest) if latest is not None else None
