"""Where a job's query endpoints are and which job model is current, from its
coordinator stream: the endpoints and the client both route with it.

Each worker writes its `framework.metadata.QueryEndpoint` (key ``queries/<id>``) when it
listens, as it writes its metrics port; the job model is the stream's latest. A
`Directory` follows the stream on one consumer and re-reads it at most every
``max_age`` seconds, or at once when an endpoint it named did not answer.
"""

from __future__ import annotations

import asyncio
import time

from framework.config import JobConfig
from framework.jobmodel import JobModel
from framework.metadata import CoordinatorReader, QueryEndpoint
from framework.systems.base import System

__all__ = ["Directory"]


class Directory:
    """The latest job model and query endpoints of one job (see the module)."""

    def __init__(self, system: System, config: JobConfig, max_age: float = 0.5) -> None:
        self._reader = CoordinatorReader(system, config)
        self.max_age = max_age
        self.model: JobModel | None = None
        self.endpoints: dict[int, QueryEndpoint] = {}
        self._read_at = float("-inf")
        self._lock = asyncio.Lock()

    async def refresh(self, *, now: bool = False) -> None:
        """Re-read the coordinator stream when the last read is older than ``max_age``
        (``now``: in any case)."""
        async with self._lock:
            if not now and time.monotonic() - self._read_at < self.max_age:
                return
            state = await self._reader.read()
            self.model, self.endpoints = state.model, state.queries
            self._read_at = time.monotonic()

    def url_of(self, worker: int) -> str | None:
        """The URL worker ``worker`` answers queries on (None: unknown or stopped)."""
        endpoint = self.endpoints.get(worker)
        return endpoint.url if endpoint is not None else None

    def urls(self) -> list[str]:
        """Every listening endpoint's URL, by worker."""
        return [e.url for _, e in sorted(self.endpoints.items()) if e.url is not None]

    async def close(self) -> None:
        await self._reader.close()
