"""The worker's one call into queries: start its endpoint when ``[queries]`` is on.

aiohttp is imported only then, so a worker of a job without queries never loads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.config import JobConfig
from framework.systems.base import System

if TYPE_CHECKING:
    from framework.queries.server import QueryServer, WorkerView

__all__ = ["start_queries"]


async def start_queries(config: JobConfig, worker: WorkerView, system: System
                        ) -> QueryServer | None:
    """The worker's running query endpoint, or None when ``[queries]`` is off."""
    if not config.queries.enabled:
        return None
    from framework.queries.server import QueryServer

    server = QueryServer(config, worker, system)
    await server.start()
    return server
