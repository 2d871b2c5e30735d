"""Where a job's query endpoints are and which job model is current, from its
coordinator stream: the endpoints and the client both route with it.

Each worker writes its `framework.metadata.QueryEndpoint` (key ``queries/<id>``) when it
listens, as it writes its metrics port; the job model is the stream's latest. A
`Directory` follows the stream on one consumer: in the background when its last read is
older than ``max_age`` seconds, at once when an endpoint it named did not answer.
"""

from __future__ import annotations

import asyncio
import logging
import time

from framework.cancel import cancel_and_wait
from framework.config import JobConfig
from framework.errors import SampanError
from framework.metadata import CoordinatorReader, QueryEndpoint
from framework.metadata.jobmodel import JobModel
from framework.systems.base import System

__all__ = ["Directory"]

log = logging.getLogger(__name__)


class Directory:
    """The latest job model and query endpoints of one job (see the module)."""

    def __init__(self, system: System, config: JobConfig, max_age: float = 0.5) -> None:
        self._reader = CoordinatorReader(system, config)
        self.max_age = max_age
        self.model: JobModel | None = None
        self.endpoints: dict[int, QueryEndpoint] = {}
        self.standbys: dict[str, QueryEndpoint] = {}
        """Host → where it answers reads of its standby copies."""
        self._read_at = float("-inf")
        self._lock = asyncio.Lock()
        self._background: asyncio.Task[None] | None = None

    async def refresh(self, *, now: bool = False) -> None:
        """Make sure the coordinator stream was read: at once the first time and with
        ``now``; otherwise, when the last read is older than ``max_age``, read it again in
        the background (a query never waits on a broker for it)."""
        if now or self._read_at == float("-inf"):
            await self._read()
        elif time.monotonic() - self._read_at >= self.max_age and (
                self._background is None or self._background.done()):
            self._background = asyncio.create_task(self._read_quietly())

    async def _read(self) -> None:
        async with self._lock:
            state = await self._reader.read()
            self.model, self.endpoints = state.model, state.queries
            self.standbys = state.standby_queries
            self._read_at = time.monotonic()

    async def _read_quietly(self) -> None:
        try:
            await self._read()
        except SampanError as error:  # the next refresh tries again; answers go on
            log.debug("reading the coordinator stream for query routing failed: %s", error)

    def url_of(self, worker: int) -> str | None:
        """The URL worker ``worker`` answers queries on (None: unknown or stopped)."""
        endpoint = self.endpoints.get(worker)
        return endpoint.url if endpoint is not None else None

    def standby_url(self, host: str) -> str | None:
        """The URL host ``host`` answers standby reads on (None: unknown or stopped)."""
        endpoint = self.standbys.get(host)
        return endpoint.url if endpoint is not None else None

    def urls(self) -> list[str]:
        """Every listening endpoint's URL, by worker."""
        return [e.url for _, e in sorted(self.endpoints.items()) if e.url is not None]

    async def close(self) -> None:
        if self._background is not None:
            await cancel_and_wait(self._background, "the query directory's refresh")
        await self._reader.close()
