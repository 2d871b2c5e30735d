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
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import orjson

from framework.config import JobConfig, load_config
from framework.config.serdes import get_serde
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
from framework.queries.routing import KeyRouter
from framework.queries.wire import TextKey, b64, from_b64, from_wire, key_from_text
from framework.secrets import Secret
from framework.stores.base import prefix_end
from framework.systems import open_system
from framework.systems.base import System

__all__ = ["Answer", "Client", "Page", "SyncClient", "Window", "WindowsAnswer",
           "standby_acceptable"]

T = TypeVar("T")

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
    standby: str | None = None
    """The host whose standby copy answered (``max_lag``); None: the task's owner."""
    lag: int | None = None
    """A standby answer's lag: changelog offsets of committed state its copy lacked."""


def standby_acceptable(lag: int, position: int, max_lag: int, floor: int | None) -> bool:
    """Whether a standby copy's answer may be returned: its lag is at most ``max_lag`` and
    its position is not below ``floor``, the highest position this client saw for the
    task (None: none yet) — so answers never go back per task, standby or not."""
    return 0 <= lag <= max_lag and (floor is None or position >= floor)


@dataclass(frozen=True)
class Page:
    """Entries of a range or prefix scan in serialized-key order; ``next`` continues it."""

    entries: list[tuple[Any, Any]]
    next: str | None
    epoch: int
    positions: Mapping[str, int | None] = field(default_factory=dict)
    standbys: Mapping[str, str] = field(default_factory=dict)
    """Task → the host whose standby copy gave its part (``max_lag``); empty: owners."""


@dataclass(frozen=True)
class Window:
    """One open window: ``[start, end)`` and its result so far."""

    start: int
    end: int
    value: Any


@dataclass(frozen=True)
class WindowsAnswer:
    """A record key's open windows in a window store, as its owning task committed them."""

    store: str
    key: Any
    windows: list[Window]
    closed: int | None
    """Every window ending at or before this was closed: its final result is in the
    task's output, no longer in the store (None: no window closed yet)."""
    task: str
    epoch: int
    position: int | None


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
        self.standby_answers = 0
        """Answers a standby copy gave (``max_lag``)."""
        self.standby_refused = 0
        """Standby answers refused: lagging more than ``max_lag``, or behind the task."""
        self._key_router: KeyRouter | None = None

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
    async def get(self, store: str, key: Any, *, consistency: Consistency | None = None,
                  max_lag: int | None = None) -> Answer:
        """``key``'s value in ``store`` (``found`` False when it has none).

        ``max_lag`` (changelog offsets; needs a job file): while the key's owner answers
        503 or not at all, a standby copy of its task may answer instead, if it lags the
        task's committed state by at most ``max_lag`` and is not behind an answer this
        client already had for the task (`standby_acceptable`)."""
        params = {**_key_params("key", key), **self._consistency(consistency)}
        standby = None if max_lag is None else (lambda: self._standby(store, key, max_lag))
        document = await self._ask(f"/v1/stores/{store}/get", params, store,
                                   self._check_max_lag(max_lag, standby))
        return Answer(store, key, bool(document["found"]), from_wire(document["value"]),
                      str(document["task"]), int(document["epoch"]), document["position"],
                      document.get("standby"), document.get("lag"))

    async def windows(self, store: str, key: Any, from_ms: int | None = None,
                      to_ms: int | None = None) -> WindowsAnswer:
        """The open windows of record key ``key`` in window store ``store`` whose start is
        in ``[from_ms, to_ms)`` (None: unbounded), oldest first; committed state."""
        params = _key_params("key", key)
        if from_ms is not None:
            params["from"] = str(int(from_ms))
        if to_ms is not None:
            params["to"] = str(int(to_ms))
        document = await self._ask(f"/v1/stores/{store}/windows", params, store)
        return WindowsAnswer(
            store, key, [Window(int(w["start"]), int(w["end"]), from_wire(w["value"]))
                         for w in document["windows"]],
            document["closed"], str(document["task"]), int(document["epoch"]),
            document["position"])

    async def owner(self, store: str, key: Any) -> dict[str, Any]:
        """Where ``key`` of ``store`` lives: task, partition, worker, host, url, epoch."""
        return await self._ask(f"/v1/stores/{store}/owner", _key_params("key", key), store)

    async def range(self, store: str, start: Any = None, end: Any = None, *,
                    limit: int = 100, after: str | None = None,
                    consistency: Consistency | None = None, max_lag: int | None = None
                    ) -> Page:
        """Entries with ``start <= key < end`` (serialized order; None: unbounded).
        ``max_lag``: as for `get`, per task — a task whose owner does not answer gives
        its part from a standby copy within ``max_lag`` (`Page.standbys` names it)."""
        params = {"limit": str(limit), **self._consistency(consistency)}
        if start is not None:
            params.update(_key_params("from", start))
        if end is not None:
            params.update(_key_params("to", end))
        standby = None if max_lag is None else (lambda: self._standby_page(
            store, lambda serialize: (serialize(start), serialize(end)), limit, after,
            max_lag))
        return await self._page(f"/v1/stores/{store}/range", params, after, store,
                                self._check_max_lag(max_lag, standby))

    async def prefix(self, store: str, prefix: Any, *, limit: int = 100,
                     after: str | None = None, consistency: Consistency | None = None,
                     max_lag: int | None = None) -> Page:
        """Entries whose serialized key starts with ``prefix`` serialized (``max_lag``:
        as for `range`)."""
        params = {"limit": str(limit), **_key_params("prefix", prefix),
                  **self._consistency(consistency)}

        def bounds(serialize: Callable[[Any], bytes | None]) -> tuple[bytes | None,
                                                                      bytes | None]:
            start = serialize(prefix) or b""
            return start, prefix_end(start)
        standby = None if max_lag is None else (lambda: self._standby_page(
            store, bounds, limit, after, max_lag))
        return await self._page(f"/v1/stores/{store}/prefix", params, after, store,
                                self._check_max_lag(max_lag, standby))

    # -- the requests -------------------------------------------------------------------
    def _consistency(self, consistency: Consistency | None) -> dict[str, str]:
        return {"consistency": consistency or self.consistency}

    def _check_max_lag(self, max_lag: int | None, standby: T | None) -> T | None:
        if max_lag is not None and (max_lag < 0 or self.config is None):
            raise QueryError("max_lag must be >= 0, and needs a Client made from the job "
                             "file (it finds the standby hosts in the job model)")
        return standby

    async def _page(self, path: str, params: dict[str, str], after: str | None,
                    store: str,
                    standby: Callable[[], Awaitable[dict[str, Any] | None]] | None = None
                    ) -> Page:
        if after is not None:
            params["after"] = after
        document = await self._ask(path, params, store, standby)
        return Page([(from_wire(e["key"]), from_wire(e["value"]))
                     for e in document["entries"]], document["next"],
                    int(document["epoch"]), document.get("positions", {}),
                    document.get("standbys", {}))

    async def _ask(self, path: str, params: dict[str, str], store: str,
                   standby: Callable[[], Awaitable[dict[str, Any] | None]] | None = None
                   ) -> dict[str, Any]:
        """One answer, retried through 503s, unreachable endpoints and stale answers until
        ``retry_for`` seconds have passed; ``standby`` is asked after each failure."""
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
            if standby is not None:
                spare = await standby()
                if spare is not None:
                    return spare
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

    async def _standby(self, store: str, key: Any, max_lag: int) -> dict[str, Any] | None:
        """An acceptable answer from a standby copy of ``key``'s task, or None."""
        assert self.config is not None
        await self._endpoints()
        assert self._directory is not None
        model = self._directory.model
        if model is None:
            return None
        router = self._router()
        try:
            typed = key_from_text(router.queryable(store).key_serde, str(key), None) if (
                isinstance(key, TextKey)) else key
            task = router.route(model, store, typed).task
        except TaskUnavailableError:
            return None
        session = self._open_session()
        headers = {"Authorization": f"Bearer {self._token.reveal()}"} if self._token else {}
        for host in model.standbys.get(task, ()):
            url = self._directory.standby_url(host)
            if url is None:
                continue
            try:
                async with session.get(f"{url}/v1/stores/{store}/standby",
                                       params=_key_params("key", key),
                                       headers=headers) as answer:
                    if answer.status != 200:
                        continue
                    document = dict(orjson.loads(await answer.read()))
            except (aiohttp.ClientError, TimeoutError, orjson.JSONDecodeError):
                continue
            position, lag = int(document["position"]), int(document["lag"])
            if document.get("task") != task:
                continue
            floor = self._floors.get((store, task))
            if not standby_acceptable(lag, position, max_lag, floor):
                self.standby_refused += 1
                continue
            self._floors[(store, task)] = position
            document["standby"] = host
            self.standby_answers += 1
            return document
        return None

    async def _standby_page(
            self, store: str,
            bounds: Callable[[Callable[[Any], bytes | None]], tuple[bytes | None, bytes | None]],
            limit: int, after: str | None, max_lag: int) -> dict[str, Any] | None:
        """A scan page asked task by task: each task's part from its owner's endpoint, or
        (owner unavailable) from a standby copy `standby_acceptable` allows; None when a
        task has neither. Merged in serialized-key order as an endpoint merges."""
        assert self.config is not None
        await self._endpoints()
        assert self._directory is not None
        model = self._directory.model
        if model is None:
            return None
        spec = self._router().queryable(store)
        serde = get_serde(spec.key_serde, search_path=self.config.root)

        def serialize(key: Any) -> bytes | None:
            if key is None:
                return None
            typed = key_from_text(spec.key_serde, str(key), None) if isinstance(
                key, TextKey) else key
            return bytes(serde.to_bytes(typed))
        start, end = bounds(serialize)
        query = {"limit": str(limit)}
        for name, value in (("start", start), ("end", end)):
            if value is not None:
                query[name] = b64(value)
        if after is not None:
            query["after"] = after
        parts: list[dict[str, Any]] = []
        for task in model.ordered_tasks():
            part = await self._owner_part(store, task.name, task.worker, query)
            if part is None:
                part = await self._standby_part(store, task.name, model.standbys.get(
                    task.name, ()), query, max_lag)
            if part is None:
                return None
            parts.append(part)
        entries = sorted((e for part in parts for e in part["entries"]),
                         key=lambda e: from_b64(e["raw"], "raw"))
        full = any(p["full"] for p in parts) or len(entries) > limit
        taken = entries[:limit]
        standbys = {p["task"]: p["standby"] for p in parts if "standby" in p}
        self.standby_answers += 1 if standbys else 0
        return {"store": store, "epoch": model.epoch, "entries": taken,
                "positions": {t: p for part in parts for t, p in part["positions"].items()},
                "standbys": standbys, "next": taken[-1]["raw"] if full and taken else None}

    async def _owner_part(self, store: str, task: str, worker: int,
                          query: Mapping[str, str]) -> dict[str, Any] | None:
        """``task``'s part of a scan from its owner's endpoint (None: it does not answer,
        or answers from before a position this client saw)."""
        assert self._directory is not None
        url = self._directory.url_of(worker)
        if url is None:
            return None
        document = await self._get_json(f"{url}/v1/stores/{store}/local-scan",
                                         {**query, "tasks": task, "consistency": "committed"})
        if document is None or self._is_stale(store, {"positions": document["positions"]}):
            return None
        return {**document, "task": task}

    async def _standby_part(self, store: str, task: str, hosts: Sequence[str],
                            query: Mapping[str, str], max_lag: int) -> dict[str, Any] | None:
        """``task``'s part of a scan from the first standby copy allowed to answer."""
        assert self._directory is not None
        for host in hosts:
            url = self._directory.standby_url(host)
            if url is None:
                continue
            document = await self._get_json(f"{url}/v1/stores/{store}/standby-scan",
                                            {**query, "task": task})
            if document is None or document.get("task") != task:
                continue
            position, lag = int(document["position"]), int(document["lag"])
            if not standby_acceptable(lag, position, max_lag,
                                      self._floors.get((store, task))):
                self.standby_refused += 1
                continue
            self._floors[(store, task)] = position
            return {**document, "positions": {task: position}, "standby": host}
        return None

    async def _get_json(self, url: str, params: Mapping[str, str]) -> dict[str, Any] | None:
        """A 200 answer's JSON, or None (another status, no answer, no JSON)."""
        session = self._open_session()
        headers = {"Authorization": f"Bearer {self._token.reveal()}"} if self._token else {}
        try:
            async with session.get(url, params=params, headers=headers) as answer:
                if answer.status != 200:
                    return None
                return dict(orjson.loads(await answer.read()))
        except (aiohttp.ClientError, TimeoutError, orjson.JSONDecodeError):
            return None

    def _router(self) -> KeyRouter:
        assert self.config is not None
        if self._key_router is None:
            self._key_router = KeyRouter(self.config)
        return self._key_router

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

    @property
    def client(self) -> Client:
        """The `Client` underneath, with its counters (retried, stale, standby answers)."""
        return self._client

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, store: str, key: Any, **options: Any) -> Answer:
        return self._runner.run(self._client.get(store, key, **options))

    def owner(self, store: str, key: Any) -> dict[str, Any]:
        return self._runner.run(self._client.owner(store, key))

    def windows(self, store: str, key: Any, from_ms: int | None = None,
                to_ms: int | None = None) -> WindowsAnswer:
        return self._runner.run(self._client.windows(store, key, from_ms, to_ms))

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


