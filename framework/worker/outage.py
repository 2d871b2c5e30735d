"""A worker rides out an unreachable system instead of crashing.

A broker that stops answering makes the worker's next call to it fail with
`SystemUnavailableError` (within the system's ``timeout_s``: a fence check every second
finds it even while nothing is processed). The worker then closes what it had open —
nothing of a commit that did not complete was applied to its stores — and `wait_for_systems`
probes its systems every `PROBE_S` until every one answers; then it runs again from its
last commit (stores restore only what they miss; under exactly-once the new transactional
producer's init aborts or completes the transaction left open). The process stays up, so
`sampan run` sees no crash and restarts nothing; how long an outage may last is the
coordinator's decision (``coordinator.max_unreachable_ms``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, Protocol

from framework.config import StreamRef, SystemConfig
from framework.errors import SampanError, SystemUnavailableError
from framework.systems import open_system

__all__ = ["PROBE_S", "job_systems", "quiet_client_futures", "raised_in_client",
           "wait_for_systems"]

log = logging.getLogger(__name__)

PROBE_S = 1.0
"""Pause between two probes of a system that does not answer."""


class SystemSettings(Protocol):
    """What waiting for a job's systems reads (a `JobConfig` is one): which systems it uses
    and how to open each."""

    @property
    def inputs(self) -> Sequence[str]: ...
    @property
    def broadcast_inputs(self) -> Sequence[str]: ...
    @property
    def metadata_system(self) -> str: ...
    def system(self, name: str) -> SystemConfig: ...


def job_systems(config: SystemSettings) -> list[str]:
    """The systems a worker of ``config`` talks to: metadata and inputs, sorted."""
    inputs = (*config.inputs, *config.broadcast_inputs)
    return sorted({config.metadata_system} | {StreamRef.parse(s).system for s in inputs})


async def _answers(config: SystemSettings, name: str) -> bool:
    """Whether system ``name`` answers a metadata request now (bounded by its timeout)."""
    system = open_system(config.system(name))
    try:
        await system.start()
        await system.list_streams()
        return True
    except SystemUnavailableError:
        return False
    finally:
        with contextlib.suppress(SampanError, OSError):
            await system.close()


async def wait_for_systems(config: SystemSettings, worker_id: int, error: SystemUnavailableError,
                           stop: asyncio.Event) -> bool:
    """After ``error``: wait until every system of the job answers; False when ``stop`` was
    set first (the worker then exits; it has nothing uncommitted to keep)."""
    log.warning("worker %d: %s; waiting for it to answer, then resuming from the last commit "
                "(nothing is lost)", worker_id, error)
    began = time.monotonic()
    waiting = job_systems(config)
    while waiting:
        if stop.is_set():
            log.info("worker %d stopped while waiting for %s to answer", worker_id,
                     ", ".join(repr(n) for n in waiting))
            return False
        if await _answers(config, waiting[0]):
            waiting.pop(0)
            continue
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), PROBE_S)
    log.info("worker %d: every system answers again after %.1f s; resuming from the last "
             "commit", worker_id, time.monotonic() - began)
    return True


def raised_in_client(error: BaseException) -> bool:
    """Whether ``error`` was raised inside aiokafka's own code (its innermost frame)."""
    trace, where = error.__traceback__, ""
    while trace is not None:
        where, trace = trace.tb_frame.f_code.co_filename, trace.tb_next
    return f"{os.sep}aiokafka{os.sep}" in where


def quiet_client_futures(loop: asyncio.AbstractEventLoop) -> None:
    """Log a Kafka client future that failed unobserved (a batch of a commit abandoned in
    an outage: its error is already reported as the outage) as one DEBUG line, and an error
    raised inside one of aiokafka's own callbacks while a broker goes away (its sender
    removing a batch twice: KeyError in ``message_accumulator``) as one WARNING line, not as
    an asyncio ERROR with a traceback; everything else the loop reports is handled as
    before."""
    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        # looked up, not imported: a job without Kafka never loads aiokafka (90 ms)
        client_errors = sys.modules.get("aiokafka.errors")
        if client_errors is not None and isinstance(error, client_errors.KafkaError):
            log.debug("%s: %r", context.get("message"), error)
            return
        if isinstance(error, Exception) and raised_in_client(error):
            log.warning("Kafka client error in its own callback (the outage is reported "
                        "separately): %s: %r", context.get("message"), error)
            return
        loop.default_exception_handler(context)

    loop.set_exception_handler(handle)
