"""The query client: any endpoint of a job answers any key; this finds one, retries
while a key's task moves, and never lets an answer go backwards per task.

``Client(job_file)`` finds the endpoints in the job's coordinator stream (the token from
its ``[queries]`` table); ``Client(["http://127.0.0.1:9400"])`` takes them as given. A
503 (the task restores or moves, its worker restarts) is retried after its
``Retry-After`` until ``retry_for`` seconds have passed; an endpoint that does not answer
is replaced by the next one. Every answer carries its task's changelog position, which
only grows across owners (a new owner answers once restored at least to where the old
one committed): an answer older than one already seen for its task is a stale endpoint
(a worker about to learn it was replaced) and is asked again, never returned.

`SyncClient` is the same for scripts without an event loop.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from framework.config import JobConfig, load_config
from framework.queries.auth import query_token
from framework.queries.directory import Directory
from framework.queries.errors import (
    EndpointUnreachableError,
    NotQueryableError,
    QueryAuthError,
    QueryError,
    TaskUnavailableError,
)
from framework.queries.reads import Consistency
from framework.queries.wire import TextKey, b64, from_wire
from framework.secrets import Secret
from framework.systems import open_system
from framework.systems.base import System

__all__ = ["Answer", "Client", "Page", "SyncClient"]

RETRY_FOR_S = 30.0
DEAD_FOR_S = 2.0
"""How long an endpoint that did not answer is skipped while others are known."""


@dataclass(frozen=True)
class Answer:
    """One key's value as its owning task had it (``found`` False: it has none)."""

    store: str
    key: Any
    found: bool
    value: Any
    task: str
    epoch: int
    position: int | None
    """The task's changelog position the answer reflects (None: an unlogged store)."""


@dataclass(frozen=True)
class Page:
    """Entries of a range or prefix scan in serialized-key order; ``next`` continues it."""

    entries: list[tuple[Any, Any]]
    next: str | None
    epoch: int
    positions: Mapping[str, int | None] = field(default_factory=dict)


class Client:
    """Queries one job's stores (see the module); ``async with`` or `close` when done."""

    def __init__(self, source: str | os.PathLike[str] | JobConfig | Sequence[str], *,
                 token: str | Secret | None = None, retry_for: float = RETRY_FOR_S,
                 consistency: Consistency = "committed") -> None:
        self.config: JobConfig | None = None
        self._urls: list[str] = []
        if isinstance(source, JobConfig):
            self.config = source
        elif isinstance(source, os.PathLike) or (
                isinstance(source, str) and not source.startswith("http")):
            self.config = load_config(Path(source))
        else:
            self._urls = [source] if isinstance(source, str) else list(source)
        if token is None and self.config is not None:
            token = query_token(self.config.queries)
        self._token = token if isinstance(token, Secret | None) else Secret(token)
        self.retry_for = retry_for
        self.consistency = consistency
        self._system: System | None = None
        self._directory: Directory | None = None
        self._session: aiohttp.ClientSession | None = None
        self._floors: dict[tuple[str, str], int] = {}
        self._next = 0
        self._dead: dict[str, float] = {}
        """Endpoint → until when it is skipped (it did not answer)."""
        self.retried = 0
        """503s and unreachable endpoints this client retried."""
        self.stale = 0
        """Answers older than one already seen for their task, asked again."""

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._directory is not None:
            await self._directory.close()
            self._directory = None
        if self._system is not None:
            await self._system.close()
            self._system = None

    # -- queries ------------------------------------------------------------------------
    async def get(self, store: str, key: Any, *, consistency: Consistency | None = None
                  ) -> Answer:
        """``key``'s value in ``store`` (``found`` False when it has none)."""
        params = {**_key_params("key", key), **self._consistency(consistency)}
        document = await self._ask(f"/v1/stores/{store}/get", params, store)
        return Answer(store, key, bool(document["found"]), from_wire(document["value"]),
                      str(document["task"]), int(document["epoch"]), document["position"])

    async def owner(self, store: str, key: Any) -> dict[str, Any]:
        """Where ``key`` of ``store`` lives: task, partition, worker, host, url, epoch."""
        return await self._ask(f"/v1/stores/{store}/owner", _key_params("key", key), store)

    async def range(self, store: str, start: Any = None, end: Any = None, *,
                    limit: int = 100, after: str | None = None,
                    consistency: Consistency | None = None) -> Page:
        """Entries with ``start <= key < end`` (serialized order; None: unbounded)."""
        params = {"limit": str(limit), **self._consistency(consistency)}
        if start is not None:
            params.update(_key_params("from", start))
        if end is not None:
            params.update(_key_params("to", end))
        return await self._page(f"/v1/stores/{store}/range", params, after, store)

    async def prefix(self, store: str, prefix: Any, *, limit: int = 100,
                     after: str | None = None, consistency: Consistency | None = None
                     ) -> Page:
        """Entries whose serialized key starts with ``prefix`` serialized."""
        params = {"limit": str(limit), **_key_params("prefix", prefix),
                  **self._consistency(consistency)}
        return await self._page(f"/v1/stores/{store}/prefix", params, after, store)

    # -- the requests -------------------------------------------------------------------
    def _consistency(self, consistency: Consistency | None) -> dict[str, str]:
        return {"consistency": consistency or self.consistency}

    async def _page(self, path: str, params: dict[str, str], after: str | None,
                    store: str) -> Page:
        if after is not None:
            params["after"] = after
        document = await self._ask(path, params, store)
        return Page([(from_wire(e["key"]), from_wire(e["value"]))
                     for e in document["entries"]], document["next"],
                    int(document["epoch"]), document.get("positions", {}))

    async def _ask(self, path: str, params: dict[str, str], store: str) -> dict[str, Any]:
        """One answer, retried through 503s, unreachable endpoints and stale answers until
        ``retry_for`` seconds have passed."""
        deadline = time.monotonic() + self.retry_for
        while True:
            try:
                document = await self._once(path, params)
                if self._is_stale(store, document):
                    self.stale += 1
                    raise TaskUnavailableError(
                        f"an endpoint answered for task {document.get('task')!r} from "
                        "before an answer already seen (it is being replaced)", 100)
                return document
            except TaskUnavailableError as error:
                wait = error.retry_after_ms / 1000
                failure: QueryError = error
            except EndpointUnreachableError as error:
                wait, failure = 0.2, error
                await self._forget_endpoints()
            if time.monotonic() + wait > deadline:
                raise failure
            self.retried += 1
            await asyncio.sleep(wait)

    def _is_stale(self, store: str, document: Mapping[str, Any]) -> bool:
        """Whether the answer is older than one seen for its task; raises the floors."""
        positions: dict[str, Any] = dict(document.get("positions") or {})
        if "task" in document and document.get("position") is not None:
            positions[str(document["task"])] = document["position"]
        stale = False
        for task, position in positions.items():
            if position is None:
                continue
            floor = self._floors.get((store, task), -1)
            if position < floor:
                stale = True
            else:
                self._floors[(store, task)] = position
        return stale

    async def _once(self, path: str, params: Mapping[str, str]) -> dict[str, Any]:
        urls = await self._endpoints()
        now = time.monotonic()
        alive = [u for u in urls if self._dead.get(u, 0) <= now] or urls
        url = alive[self._next % len(alive)]
        session = self._open_session()
        headers = {"Authorization": f"Bearer {self._token.reveal()}"} if self._token else {}
        try:
            async with session.get(url + path, params=params, headers=headers) as answer:
                body = await answer.read()
                status = answer.status
        except (aiohttp.ClientError, TimeoutError) as error:
            self._dead[url] = time.monotonic() + DEAD_FOR_S  # the others meanwhile
            self._next += 1
            raise EndpointUnreachableError(
                f"the query endpoint {url} does not answer ({type(error).__name__})"
            ) from None
        try:
            document = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise QueryError(f"{url}{path} answered {status} without JSON") from None
        if status == 200:
            return dict(document)
        raise _error(status, document)

    async def _endpoints(self) -> list[str]:
        if self._urls:
            return self._urls
        if self.config is None:
            raise EndpointUnreachableError("no query endpoint given")
        if not self.config.queries.enabled:
            raise NotQueryableError(
                f"job {self.config.name!r} does not answer queries; add [queries] enabled = "
                f"true to {self.config.path} and restart it (`sampan run`)")
        if self._directory is None:
            self._system = open_system(self.config.system(self.config.metadata_system))
            await self._system.start()
            self._directory = Directory(self._system, self.config)
        await self._directory.refresh()
        urls = self._directory.urls()
        if not urls:
            raise EndpointUnreachableError(
                f"job {self.config.name!r} has no query endpoint in "
                f"{self.config.coordinator_stream}; is it running (`sampan run "
                f"{self.config.path}`) with [queries] enabled = true?")
        return urls

    async def _forget_endpoints(self) -> None:
        if self._directory is not None:
            await self._directory.refresh(now=True)

    def _open_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        return self._session


class SyncClient:
    """`Client` for code without an event loop: the same methods, blocking."""

    def __init__(self, source: str | os.PathLike[str] | JobConfig | Sequence[str],
                 **options: Any) -> None:
        self._runner = asyncio.Runner()
        self._client = self._runner.run(_make(source, options))

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, store: str, key: Any, **options: Any) -> Answer:
        return self._runner.run(self._client.get(store, key, **options))

    def owner(self, store: str, key: Any) -> dict[str, Any]:
        return self._runner.run(self._client.owner(store, key))

    def range(self, store: str, start: Any = None, end: Any = None, **options: Any) -> Page:
        return self._runner.run(self._client.range(store, start, end, **options))

    def prefix(self, store: str, prefix: Any, **options: Any) -> Page:
        return self._runner.run(self._client.prefix(store, prefix, **options))

    def scan(self, store: str, *, prefix: Any = None, start: Any = None, end: Any = None,
             limit: int = 100) -> Iterator[tuple[Any, Any]]:
        """Every entry of a prefix or range scan, page after page."""
        after: str | None = None
        while True:
            page = (self.prefix(store, prefix, limit=limit, after=after) if prefix is not None
                    else self.range(store, start, end, limit=limit, after=after))
            yield from page.entries
            if page.next is None:
                return
            after = page.next

    def close(self) -> None:
        try:
            self._runner.run(self._client.close())
        finally:
            self._runner.close()


async def _make(source: Any, options: Mapping[str, Any]) -> Client:
    return Client(source, **options)


def _key_params(name: str, key: Any) -> dict[str, str]:
    """A key as URL parameters, its form said outright (see `framework.queries.wire`)."""
    if isinstance(key, TextKey):
        return {name: str(key)}
    if isinstance(key, str):
        return {name: key, "key_format": "text"}
    if isinstance(key, bytes | bytearray):
        return {name: b64(bytes(key)), "key_format": "base64"}
    return {name: orjson.dumps(key).decode(), "key_format": "json"}


def _error(status: int, document: Any) -> QueryError:
    message = str(document.get("error", document)) if isinstance(document, dict) else str(
        document)
    if status == 503:
        retry = document.get("retry_after_ms", 1000) if isinstance(document, dict) else 1000
        return TaskUnavailableError(message, int(retry))
    if status == 401:
        return QueryAuthError(message)
    if status == 404:
        return NotQueryableError(message)
    error = QueryError(message)
    error.status = status
    return error


