"""A worker's query endpoint: aiohttp in the worker's event loop, read-only.

Every endpoint answers every key. It routes the key through the newest job model it
knows (its worker's, or the coordinator stream's: `Directory`) with `KeyRouter`; a key of
a task this worker runs is read here (`framework.queries.reads`: committed state unless
``consistency=uncommitted``), any other is forwarded once to the owner's endpoint (or
redirected with ``redirect=1``). A task that is restoring, moving, or whose endpoint
does not answer gets 503 with ``Retry-After`` — never an empty or an old answer. Range
and prefix scans ask every task of the store and merge in serialized-key order; the
continuation (``next``) is the last key returned. A window store answers a record key's
open windows (``/windows``). See docs/queries.md for the API.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import orjson
from aiohttp import web

from framework.config import JobConfig
from framework.config.serdes import get_serde
from framework.errors import SampanError
from framework.metadata import QueryEndpoint, publish_query_endpoint
from framework.metadata.jobmodel import PARKED, JobModel
from framework.queries.auth import query_token
from framework.queries.directory import Directory
from framework.queries.errors import QueryError, TaskUnavailableError
from framework.queries.http import (
    after_of,
    b64_param,
    body_of,
    consistency_of,
    json_response,
    limit_of,
    middlewares,
    relayed,
    time_of,
)
from framework.queries.reads import Consistency, Scan, read_key, scan
from framework.queries.routing import KeyRouter, Route
from framework.queries.windows import read_windows
from framework.queries.wire import b64, from_b64, key_from_text
from framework.stores.base import prefix_end
from framework.stores.buffer import TaskStore
from framework.systems.base import System

__all__ = ["FORWARDED", "QueryServer", "TaskView", "WorkerView"]

log = logging.getLogger(__name__)

FORWARDED = "X-Sampan-Forwarded"
"""Header of a request one endpoint forwarded to another: never forwarded again."""

WITHDRAW_S = 2.0
"""How long a closing endpoint tries to withdraw its URL from the coordinator stream."""



class TaskView(Protocol):
    """What the endpoint reads of one running task (a `TaskInstance`)."""

    @property
    def name(self) -> str: ...

    @property
    def stores(self) -> Mapping[str, Any]: ...


class WorkerView(Protocol):
    """What the endpoint reads of its worker: its id, model and running tasks (a task is
    listed once its stores are restored, and no more once it is let go)."""

    @property
    def worker_id(self) -> int: ...

    @property
    def model(self) -> JobModel | None: ...

    @property
    def instances(self) -> Sequence[TaskView]: ...


class QueryServer:
    """One worker's endpoint; `start` listens and publishes its URL, `close` withdraws it."""

    def __init__(self, config: JobConfig, worker: WorkerView, system: System) -> None:
        self.config = config
        self.settings = config.queries
        self.worker = worker
        self.system = system
        self.router = KeyRouter(config)
        self.directory = Directory(system, config)
        self.token = query_token(self.settings)
        self.url: str | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._started_ms = int(time.time() * 1000)

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        app = web.Application(middlewares=middlewares(self.token, self.config.name))
        app.add_routes([
            web.get("/v1/health", self._health),
            web.get("/v1/stores/{store}/get", self._get),
            web.get("/v1/stores/{store}/owner", self._owner),
            web.get("/v1/stores/{store}/range", self._range),
            web.get("/v1/stores/{store}/prefix", self._prefix),
            web.get("/v1/stores/{store}/windows", self._windows),
            web.get("/v1/stores/{store}/local-scan", self._local_scan),
        ])
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        port = await self._listen(self._runner)
        self.url = _url(self._advertised(), port)
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(
            total=self.settings.forward_timeout_ms / 1000))
        _remember_port(self._port_file(), port)
        log.info("worker %d answers queries on %s", self.worker.worker_id, self.url)
        if self.token is None and self.settings.bind not in ("127.0.0.1", "::1"):
            log.warning("worker %d answers queries on %s to any machine without a token; "
                        "set [queries] token = \"${NAME}\" or token_file",
                        self.worker.worker_id, self.settings.bind)
        await self._publish(self.url)

    async def close(self) -> None:
        """Stop answering (its URL withdrawn first, so others stop forwarding here)."""
        if self._runner is None:
            return
        runner, self._runner = self._runner, None
        # Withdrawn at once or not at all: a stopping worker never waits on a broker for
        # it (a stale URL only costs the others a refused connection and a 503).
        with contextlib.suppress(SampanError, TimeoutError):
            await asyncio.wait_for(self._publish(None), WITHDRAW_S)
        await runner.cleanup()
        if self._session is not None:
            await self._session.close()
        await self.directory.close()

    async def _listen(self, runner: web.AppRunner) -> int:
        bind, wanted = self.settings.bind, self.settings.worker_port(self.worker.worker_id)
        ports = [wanted] if wanted else [p for p in (_previous_port(self._port_file()), 0)
                                         if p is not None]
        for i, port in enumerate(ports):
            site = web.TCPSite(runner, bind, port, reuse_address=True)
            try:
                await site.start()
            except OSError as error:
                if i + 1 < len(ports):
                    continue  # the last port is taken meanwhile: any free one will do
                raise SampanError(
                    f"worker {self.worker.worker_id} of job {self.config.name!r} cannot serve "
                    f"queries on {bind}:{port} ({error.strerror or error}); choose another "
                    "[queries] port (0 picks free ports)") from None
            server = site._server  # noqa: SLF001 - the only way to read a port-0 socket
            assert server is not None
            return int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]
        raise AssertionError("no port to try")

    def _advertised(self) -> str:
        if self.settings.advertised_host:
            return self.settings.advertised_host
        bind = self.settings.bind
        return socket.gethostname() if bind in ("0.0.0.0", "::", "") else bind

    def _port_file(self) -> Path:
        return self.config.state_dir / "queries" / f"worker-{self.worker.worker_id}.port"

    async def _publish(self, url: str | None) -> None:
        model = self.worker.model
        await publish_query_endpoint(self.system, self.config, self.worker.worker_id,
                                     QueryEndpoint(model.epoch if model else 0, os.getpid(),
                                                   self._started_ms, url))

    # -- handlers -----------------------------------------------------------------------
    async def _health(self, request: web.Request) -> web.Response:
        model = self.worker.model
        return json_response({"worker": self.worker.worker_id,
                              "epoch": model.epoch if model else None,
                              "tasks": [t.name for t in self.worker.instances]})

    async def _get(self, request: web.Request) -> web.StreamResponse:
        store = request.match_info["store"]
        key = self._key(request, store, "key")
        consistency = consistency_of(request)
        route, model = await self._route(store, key)
        if route.worker != self.worker.worker_id:
            return await self._elsewhere(request, route, model)
        task = self._running(route.task)
        found = read_key(_task_store(task, store), key, consistency)
        return json_response({
            "store": store, "key": key, "found": found.found, "value": found.value,
            "task": route.task, "partition": route.partition, "worker": self.worker.worker_id,
            "epoch": model.epoch, "position": found.position, "consistency": consistency})

    async def _windows(self, request: web.Request) -> web.StreamResponse:
        """A record key's open windows in a window store, by window start
        (`framework.queries.windows`): committed state only."""
        store = request.match_info["store"]
        spec = self.router.queryable(store)
        assert spec.keyed_by is not None
        text = request.query.get("key")
        if text is None:
            raise QueryError("the query has no key; add ?key=<record key>")
        key = key_from_text(self.config.stream(spec.keyed_by).key_serde, text,
                            request.query.get("key_format"))
        start, end = time_of(request, "from"), time_of(request, "to")
        if consistency_of(request) != "committed":
            raise QueryError("windows are answered from committed state only; leave "
                             "consistency out")
        model = await self._model()
        route = self.router.route(model, store, key, record_key=True)
        if route.worker == PARKED:
            raise self._unavailable(f"task {route.task!r} is moving between hosts (epoch "
                                    f"{model.epoch})")
        if route.worker != self.worker.worker_id:
            return await self._elsewhere(request, route, model)
        task = self._running(route.task)
        found = read_windows(_task_store(task, store), key, start, end,
                             self.settings.retry_after_ms)
        return json_response({
            "store": store, "key": key, "task": route.task, "partition": route.partition,
            "worker": self.worker.worker_id, "epoch": model.epoch, "position": found.position,
            "closed": found.closed, "consistency": "committed",
            "windows": [{"start": w.start, "end": w.end, "value": w.value}
                        for w in found.windows]})

    async def _owner(self, request: web.Request) -> web.Response:
        store = request.match_info["store"]
        key = self._key(request, store, "key")
        route, model = await self._route(store, key, refuse_parked=False)
        url = self.directory.url_of(route.worker) if route.worker != PARKED else None
        if route.worker == self.worker.worker_id:
            url = self.url
        return json_response({
            "store": store, "key": key, "task": route.task, "stream": route.stream,
            "partition": route.partition,
            "worker": None if route.worker == PARKED else route.worker,
            "host": route.host(model), "url": url, "epoch": model.epoch})

    async def _range(self, request: web.Request) -> web.Response:
        store = request.match_info["store"]
        start = self._bound(request, store, "from")
        end = self._bound(request, store, "to")
        return await self._scan(request, store, Scan(start, end, after_of(request),
                                                     limit_of(request)))

    async def _prefix(self, request: web.Request) -> web.Response:
        store = request.match_info["store"]
        prefix = self._bound(request, store, "prefix") or b""
        return await self._scan(request, store, Scan(prefix, prefix_end(prefix),
                                                     after_of(request), limit_of(request)))

    async def _local_scan(self, request: web.Request) -> web.Response:
        """Another endpoint's scan of the tasks it was told this worker runs."""
        store = request.match_info["store"]
        tasks = [t for t in request.query.get("tasks", "").split(",") if t]
        bounds = Scan(b64_param(request, "start"), b64_param(request, "end"),
                      after_of(request), limit_of(request))
        return json_response(self._scan_here(store, tasks, bounds, consistency_of(request)))

    # -- routing ------------------------------------------------------------------------
    async def _route(self, store: str, key: Any, *, refuse_parked: bool = True
                     ) -> tuple[Route, JobModel]:
        self.router.queryable(store)
        model = await self._model()
        route = self.router.route(model, store, key)
        if refuse_parked and route.worker == PARKED:
            raise self._unavailable(f"task {route.task!r} is moving between hosts (epoch "
                                    f"{model.epoch})")
        return route, model

    async def _model(self) -> JobModel:
        """The newest job model this endpoint knows: its worker's or the stream's."""
        await self.directory.refresh()
        own, latest = self.worker.model, self.directory.model
        if own is None or (latest is not None and latest.epoch > own.epoch):
            own = latest
        if own is None:
            raise self._unavailable(f"job {self.config.name!r} has no job model yet")
        return own

    def _running(self, task: str) -> TaskView:
        found = next((t for t in self.worker.instances if t.name == task), None)
        if found is None:
            raise self._unavailable(f"task {task!r} is restoring or moving on worker "
                                    f"{self.worker.worker_id}")
        return found

    async def _elsewhere(self, request: web.Request, route: Route, model: JobModel
                         ) -> web.StreamResponse:
        """Forward (or redirect) a request for a key another worker owns."""
        if FORWARDED in request.headers:
            raise self._unavailable(f"task {route.task!r} is not on worker "
                                    f"{self.worker.worker_id} (it is moving)")
        url = await self._url_of(route.worker, route.task)
        if request.query.get("redirect") in ("1", "true"):
            raise web.HTTPTemporaryRedirect(url + request.path_qs)
        return await self._forward(url, request.path_qs, request)

    async def _url_of(self, worker: int, task: str) -> str:
        url = self.directory.url_of(worker)
        if url is None:
            await self.directory.refresh(now=True)
            url = self.directory.url_of(worker)
        if url is None:
            raise self._unavailable(f"worker {worker}, running task {task!r}, has no query "
                                    "endpoint yet (starting)")
        return url

    async def _forward(self, url: str, path: str, request: web.Request) -> web.Response:
        assert self._session is not None
        headers = {FORWARDED: str(self.worker.worker_id)}
        if "Authorization" in request.headers:
            headers["Authorization"] = request.headers["Authorization"]
        try:
            async with self._session.get(url + path, headers=headers) as answer:
                body = await answer.read()
                kept = {k: v for k, v in answer.headers.items() if k == "Retry-After"}
                return web.Response(body=body, status=answer.status, headers=kept,
                                    content_type="application/json")
        except (aiohttp.ClientError, TimeoutError) as error:
            await self.directory.refresh(now=True)
            raise self._unavailable(f"the query endpoint {url} does not answer "
                                    f"({type(error).__name__}); its worker may be "
                                    "restarting") from None

    # -- scans --------------------------------------------------------------------------
    async def _scan(self, request: web.Request, store: str, bounds: Scan) -> web.Response:
        """Every task's entries in ``bounds``, merged in serialized-key order."""
        self.router.queryable(store)
        consistency = consistency_of(request)
        model = await self._model()
        by_worker: dict[int, list[str]] = {}
        for task in model.ordered_tasks():
            if task.worker == PARKED:
                raise self._unavailable(f"task {task.name!r} is moving between hosts")
            by_worker.setdefault(task.worker, []).append(task.name)
        parts = await asyncio.gather(*(
            self._scan_of(request, store, worker, tasks, bounds, consistency)
            for worker, tasks in sorted(by_worker.items())))
        entries = sorted((e for part in parts for e in part["entries"]),
                         key=lambda e: from_b64(e["raw"], "raw"))
        full = any(p["full"] for p in parts) or len(entries) > bounds.limit
        taken = entries[:bounds.limit]
        return json_response({
            "store": store, "epoch": model.epoch, "consistency": consistency,
            "entries": [{"key": e["key"], "value": e["value"], "task": e["task"]}
                        for e in taken],
            "positions": {t: p for part in parts for t, p in part["positions"].items()},
            "next": taken[-1]["raw"] if full and taken else None})

    async def _scan_of(self, request: web.Request, store: str, worker: int,
                       tasks: list[str], bounds: Scan, consistency: Consistency
                       ) -> dict[str, Any]:
        if worker == self.worker.worker_id:
            return self._scan_here(store, tasks, bounds, consistency)
        if FORWARDED in request.headers:
            raise self._unavailable(f"worker {worker} is asked to scan here")
        url = await self._url_of(worker, tasks[0])
        query = {"tasks": ",".join(tasks), "limit": str(bounds.limit),
                 "consistency": consistency}
        for name, value in (("start", bounds.start), ("end", bounds.end),
                            ("after", bounds.after)):
            if value is not None:
                query[name] = b64(value)
        path = str(request.rel_url.with_path(f"/v1/stores/{store}/local-scan")
                   .with_query(query))
        answer = await self._forward(url, path, request)
        if answer.status != 200:
            raise relayed(answer)
        return dict(orjson.loads(body_of(answer)))

    def _scan_here(self, store: str, tasks: list[str], bounds: Scan,
                   consistency: Consistency) -> dict[str, Any]:
        entries: list[dict[str, Any]] = []
        positions: dict[str, int | None] = {}
        full = False
        for name in tasks:
            found, position = scan(_task_store(self._running(name), store), bounds,
                                   consistency)
            positions[name] = position
            full = full or len(found) >= bounds.limit
            entries.extend({"raw": b64(raw), "key": key, "value": value, "task": name}
                           for raw, key, value in found)
        return {"entries": entries, "positions": positions, "full": full}

    # -- parameters ---------------------------------------------------------------------
    def _key(self, request: web.Request, store: str, name: str) -> Any:
        text = request.query.get(name)
        if text is None:
            raise QueryError(f"the query has no {name}; add ?{name}=<key>")
        serde = self.router.queryable(store).key_serde
        return key_from_text(serde, text, request.query.get("key_format"))

    def _bound(self, request: web.Request, store: str, name: str) -> bytes | None:
        if name not in request.query:
            return None
        spec = self.router.queryable(store)
        key = self._key(request, store, name)
        try:
            data = get_serde(spec.key_serde, search_path=self.config.root).to_bytes(key)
        except Exception as error:
            raise QueryError(f"store {store!r}: {name} {key!r} cannot be serialized with "
                             f"its {spec.key_serde} key serde: {error}") from error
        return bytes(data)

    def _unavailable(self, why: str) -> TaskUnavailableError:
        return TaskUnavailableError(f"{why}; retry after {self.settings.retry_after_ms} ms",
                                    self.settings.retry_after_ms)


def _task_store(task: TaskView, store: str) -> TaskStore:
    found = task.stores.get(store)
    if not isinstance(found, TaskStore):
        raise QueryError(f"task {task.name!r} has no queryable store {store!r}")
    return found


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _previous_port(path: Path) -> int | None:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None


def _remember_port(path: Path, port: int) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(str(port))
    except OSError as error:  # only lets the next start ask for the same port
        log.warning("cannot write %s: %s", path, error)

