"""The worker's and the host's one call into queries: start the worker's endpoint when
``[queries]`` is on, and the host's standby-read endpoint when it is and the job keeps
standby replicas.

aiohttp is imported only then, so a worker of a job without queries never loads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.config import JobConfig
from framework.systems.base import System

if TYPE_CHECKING:
    from framework.queries.server import QueryServer, WorkerView
    from framework.queries.standby import HostView, StandbyServer

__all__ = ["start_queries", "start_standby_reads"]


async def start_queries(config: JobConfig, worker: WorkerView, system: System
                        ) -> QueryServer | None:
    """The worker's running query endpoint, or None when ``[queries]`` is off."""
    if not config.queries.enabled:
        return None
    from framework.queries.server import QueryServer

    server = QueryServer(config, worker, system)
    await server.start()
    return server


async def start_standby_reads(config: JobConfig, host: HostView, system: System
                              ) -> StandbyServer | None:
    """The host's running standby-read endpoint (`framework.queries.standby`), or None
    when ``[queries]`` is off or the job keeps no standby replicas."""
    if not config.queries.enabled or not config.standby_replicas:
        return None
    from framework.queries.standby import StandbyServer

    server = StandbyServer(config, host, system)
    await server.start()
    return server
