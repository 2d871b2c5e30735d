"""The coordinator's retention pass: which of the job's streams have retention in force,
and the background loop that applies it on the local log (Kafka brokers apply their own)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Protocol

from framework.config import CoordinatorConfig, StreamConfig, SystemConfig
from framework.errors import SampanError, StreamNotFoundError
from framework.systems.base import System
from framework.systems.local.retention import RetentionPolicy, RetentionResult
from framework.systems.local.system import LocalSystem

__all__ = ["retain_forever", "retain_once", "retention_policies", "retention_policy"]

log = logging.getLogger(__name__)


class RetentionSettings(Protocol):
    """What the retention pass reads (a `JobConfig` is one): the job's streams, their
    systems' defaults, and how often to pass."""

    @property
    def streams(self) -> Mapping[str, StreamConfig]: ...
    @property
    def systems(self) -> Mapping[str, SystemConfig]: ...
    @property
    def coordinator(self) -> CoordinatorConfig: ...


def retention_policy(config: RetentionSettings, stream: StreamConfig) -> RetentionPolicy:
    """The retention in force for ``stream``: its own keys, else its system's defaults
    (nothing for compacted streams and streams of Kafka systems)."""
    system = config.systems.get(stream.system)
    if stream.compacted or system is None or system.type != "local":
        return RetentionPolicy()
    return RetentionPolicy(
        retention_ms=stream.retention_ms if stream.retention_ms is not None
        else system.retention_ms,
        retention_bytes=stream.retention_bytes if stream.retention_bytes is not None
        else system.retention_bytes,
        mode=stream.retention_mode or system.retention_mode or "wait-for-readers")


def retention_policies(config: RetentionSettings) -> dict[StreamConfig, RetentionPolicy]:
    """Every declared stream of the job with a retention limit, sorted by name."""
    policies = {stream: retention_policy(config, stream)
                for _, stream in sorted(config.streams.items())}
    return {stream: policy for stream, policy in policies.items() if policy.active}


async def retain_once(config: RetentionSettings, systems: Mapping[str, System]
                      ) -> dict[str, RetentionResult]:
    """One pass over the job's streams with retention; what it did per stream. A failure
    on one stream is logged and the others still go."""
    results = {}
    for stream, policy in retention_policies(config).items():
        system = systems.get(stream.system)
        if not isinstance(system, LocalSystem):
            continue
        try:
            result = await system.apply_retention(stream.stream, policy)
        except StreamNotFoundError:
            continue  # not created yet
        except SampanError as error:
            log.warning("retention of %s failed (%s); retrying at the next pass",
                        stream.qualified, error)
            continue
        results[stream.qualified] = result
        _report(stream.qualified, result)
    return results


def _report(stream: str, result: RetentionResult) -> None:
    if result.batches:
        log.info("retention of %s: deleted %d records (%d bytes) in %d batches", stream,
                 result.records, result.bytes, result.batches)
    for reset in result.resets:
        log.warning("retention of %s: job %r: %s", stream, reset.job, reset.describe())
    for job, task, partition in sorted(result.waiting_for):
        who = f"task {task!r}" if task else "a task that has not read it yet"
        log.info("retention of %s partition %d waits for job %r (%s): records past "
                 "retention stay until it commits past them (retention_mode = "
                 "\"wait-for-readers\")", stream, partition, job, who)


async def retain_forever(config: RetentionSettings, systems: Mapping[str, System]) -> None:
    """Apply retention every ``coordinator.retention_interval_ms`` until cancelled, each
    local system through a connection (and thread) of its own: a long pass never delays
    the coordinator's own calls (lease renewals, checkpoint and offset reads)."""
    interval = config.coordinator.retention_interval_ms / 1000
    own: dict[str, System] = {
        name: LocalSystem(system.name, system.path, system.options)
        for name, system in systems.items() if isinstance(system, LocalSystem)}
    try:
        while True:
            await retain_once(config, own)
            await asyncio.sleep(interval)
    finally:
        for system in own.values():
            await system.close()
