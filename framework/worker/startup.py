"""A worker's start before its tasks: the systems its job uses, the go of a prepared
worker, and the job model it runs (checked against its job file and worker id)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from framework.config import JobConfig
from framework.errors import JobModelError
from framework.metadata.jobmodel import JobModel
from framework.systems import open_system
from framework.systems.base import System
from framework.worker.following import ModelSource

__all__ = ["load_model", "open_systems", "wait_for_go"]


async def open_systems(config: JobConfig, systems: dict[str, System]) -> None:
    """Open the metadata system and those of the inputs into ``systems``, in name order
    (each one in it as soon as it started: closed with the worker)."""
    names = {config.metadata_system} | {
        config.stream(s).system for s in (*config.inputs, *config.broadcast_inputs)}
    for name in sorted(names):
        system = open_system(config.system(name))
        await system.start()
        systems[name] = system


async def wait_for_go(go: Callable[[], Awaitable[bool]], stop: asyncio.Event) -> bool:
    """Whether a prepared worker is to run: ``go()``, unless stopped first."""
    told = asyncio.ensure_future(go())
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((told, stopped), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if not told.done():
        told.cancel()
        return False
    return told.result()


async def load_model(config: JobConfig, worker_id: int, given: JobModel | None,
                     source: ModelSource) -> JobModel:
    """``given``, else the latest model of ``source``: `JobModelError` saying what to do
    when there is none, it was built from another job file, or it has no such worker."""
    model = given or await source.latest_model()
    if model is None:
        raise JobModelError(
            f"job {config.name!r} has no job model yet in {config.coordinator_stream}; "
            f"start the job with `sampan run {config.path}` (it publishes the model and "
            f"starts workers)")
    if model.config_digest != config.digest:
        raise JobModelError(
            f"the job model of epoch {model.epoch} was built from another version of "
            f"{config.path}; restart the coordinator (`sampan run`) so it publishes "
            f"a model for this config")
    ids = model.worker_ids()
    if worker_id not in ids:
        raise JobModelError(
            f"worker {worker_id} is not part of epoch {model.epoch}, which has "
            f"workers {', '.join(map(str, ids))}")
    return model
