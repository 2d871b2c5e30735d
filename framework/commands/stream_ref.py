"""The ``SYSTEM.STREAM`` argument of the `sampan streams` commands: split against the job
file, its system opened, and named in errors with the fix and a "did you mean"."""

from __future__ import annotations

from collections.abc import Iterable

from framework.config import JobConfig, StreamRef
from framework.config.schema import did_you_mean_stream
from framework.errors import ConfigError, StreamNotFoundError
from framework.systems import open_system
from framework.systems.base import System

__all__ = ["check_input", "missing_stream", "split_stream", "started_system"]


def split_stream(config: JobConfig, qualified: str) -> tuple[str, str]:
    """``qualified`` as (system, stream); `ConfigError` unless its system is declared."""
    system, stream = StreamRef.parse(qualified)
    if not stream:
        raise ConfigError(f"{qualified!r}: expected SYSTEM.STREAM, e.g. local.events")
    config.system(system)  # raises naming the declared systems
    return system, stream


async def started_system(config: JobConfig, system_name: str) -> System:
    """The job file's system ``system_name``, started (close it when done)."""
    system = open_system(config.system(system_name))
    await system.start()
    return system


def missing_stream(config: JobConfig, qualified: str, existing: Iterable[str] = ()
                   ) -> StreamNotFoundError:
    """``qualified`` does not exist: how to create it, or the ``existing`` stream (names
    inside its system) it most likely meant."""
    system = qualified.partition(".")[0]
    hint = did_you_mean_stream(qualified, (f"{system}.{name}" for name in existing))
    return StreamNotFoundError(
        f"stream {qualified} does not exist; create it with `sampan streams create "
        f"{qualified} --partitions N --job {config.path}`{hint}")


def check_input(config: JobConfig, qualified: str) -> None:
    """`ConfigError` unless ``qualified`` is an input (or broadcast input) of the job."""
    inputs = (*config.inputs, *config.broadcast_inputs)
    if qualified not in inputs:
        raise ConfigError(f"{qualified} is not an input of job {config.name!r} (inputs: "
                          f"{', '.join(inputs)}){did_you_mean_stream(qualified, inputs)}")
