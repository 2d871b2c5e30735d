"""A host's standby-read endpoint: a key's value from this host's standby copy of its
task, with the copy's changelog position and lag, for reads with ``max_lag``.

The copies are `framework.hosts.replicas.Replicas`' RocksDB engines, tailed from the
changelog up to the task's checkpointed changelog offset and never past it, so every
value a copy holds is committed. A copy applies the changelog a batch at a time, and a
commit writes each key once (the write buffer keeps its last value), so per key the copy
holds a value the key had at a commit — though keys of one copy may be from different
commits. The lag is ``committed end − position`` in changelog offsets, where the
committed end is the smaller of the changelog's end and the task's checkpointed offset:
on the local log both are the last commit (changelog and checkpoint land in one
transaction); on Apache Kafka the changelog end may hold records of a commit that never
checkpointed (a crash rolls them back), so the checkpoint is the end. Offsets on Kafka
count transaction markers too, so the lag there is an upper bound on records. The end is
read after the value, so the lag stated is never below the lag the value had.

Answers only; it never routes elsewhere: the client (`framework.queries.client`, with
``max_lag``) asks it when the key's owner answers 503 or not at all — for a get, the key;
for a range or prefix scan, the part of one task whose owner does not answer
(``…/standby-scan?task=T``, bounds as the workers' ``local-scan`` takes them). A task this
host keeps no copy of answers 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from typing import Protocol

from aiohttp import web

from framework.config import JobConfig
from framework.config.serdes import get_serde
from framework.errors import SampanError
from framework.metadata import QueryEndpoint, publish_standby_endpoint
from framework.metadata.jobmodel import JobModel
from framework.queries.auth import query_token
from framework.queries.errors import QueryError, TaskUnavailableError
from framework.queries.http import after_of, b64_param, json_response, limit_of, middlewares
from framework.queries.reads import Scan, read_key, scan
from framework.queries.routing import KeyRouter
from framework.queries.wire import b64, key_from_text
from framework.stores.base import StoreEngine
from framework.stores.buffer import TaskStore
from framework.systems.base import System

__all__ = ["HostView", "StandbyServer", "committed_end"]

log = logging.getLogger(__name__)

WITHDRAW_S = 2.0



class Copies(Protocol):
    def copy_of(self, task: str, store: str) -> StoreEngine | None: ...


class HostView(Protocol):
    """What the endpoint reads of its host: name, current model and standby copies."""

    @property
    def name(self) -> str: ...

    @property
    def model(self) -> JobModel | None: ...

    @property
    def replicas(self) -> Copies | None: ...


async def committed_end(system: System, config: JobConfig, task: str, store: str,
                        partition: int) -> int:
    """The changelog offset ``task``'s committed state of ``store`` ends at (the module:
    the smaller of the changelog's end and the task's checkpointed offset)."""
    stream = config.changelog_ref(store).stream
    span = (await system.offsets(stream)).get(partition)
    end = span.end if span is not None else 0
    checkpoint = (await system.read_checkpoints(config.name)).get(task)
    if checkpoint is not None and store in checkpoint.changelogs:
        end = min(end, checkpoint.changelogs[store])
    return end


class StandbyServer:
    """One host's standby-read endpoint; `start` listens and publishes, `close` withdraws."""

    def __init__(self, config: JobConfig, host: HostView, system: System) -> None:
        self.config = config
        self.settings = config.queries
        self.host = host
        self.system = system
        self.router = KeyRouter(config)
        self.token = query_token(self.settings)
        self.url: str | None = None
        self._runner: web.AppRunner | None = None
        self._started_ms = int(time.time() * 1000)

    async def start(self) -> None:
        app = web.Application(middlewares=middlewares(self.token, self.config.name))
        app.add_routes([web.get("/v1/health", self._health),
                        web.get("/v1/stores/{store}/standby", self._standby),
                        web.get("/v1/stores/{store}/standby-scan", self._standby_scan)])
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        bind = self.settings.bind
        site = web.TCPSite(self._runner, bind, 0)  # any free port: it is published
        try:
            await site.start()
        except OSError as error:
            raise SampanError(f"host {self.host.name!r} of job {self.config.name!r} cannot "
                              f"serve standby reads on {bind} ({error.strerror or error}); "
                              "check [queries] bind") from None
        server = site._server  # noqa: SLF001 - the only way to read a port-0 socket
        assert server is not None
        port = int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]
        advertised = self.settings.advertised_host or bind
        self.url = (f"http://[{advertised}]:{port}" if ":" in advertised
                    else f"http://{advertised}:{port}")
        log.info("host %r answers standby reads on %s", self.host.name, self.url)
        await self._publish(self.url)

    async def close(self) -> None:
        if self._runner is None:
            return
        runner, self._runner = self._runner, None
        with contextlib.suppress(SampanError, TimeoutError):
            await asyncio.wait_for(self._publish(None), WITHDRAW_S)
        await runner.cleanup()

    async def _publish(self, url: str | None) -> None:
        model = self.host.model
        await publish_standby_endpoint(
            self.system, self.config, self.host.name,
            QueryEndpoint(model.epoch if model else 0, os.getpid(), self._started_ms, url,
                          self.host.name))

    async def _health(self, request: web.Request) -> web.Response:
        model = self.host.model
        return json_response({"host": self.host.name,
                              "epoch": model.epoch if model else None,
                              "standbys": sorted(t for t, hosts in (
                                  model.standbys.items() if model else ())
                                  if self.host.name in hosts)})

    async def _standby(self, request: web.Request) -> web.Response:
        store = request.match_info["store"]
        spec = self.router.queryable(store)
        text = request.query.get("key")
        if text is None:
            raise QueryError("the query has no key; add ?key=<key>")
        key = key_from_text(spec.key_serde, text, request.query.get("key_format"))
        model = self.host.model
        if model is None:
            raise self._unavailable(f"host {self.host.name!r} has no job model yet")
        route = self.router.route(model, store, key)
        view = self._copy(model, route.task, store)
        found = read_key(view, key, "committed")  # synchronous: one copy state, whole
        position = found.position or 0
        end = await committed_end(self.system, self.config, route.task, store,
                                  model.tasks[route.task].changelog_partition)
        return json_response({
            "store": store, "key": key, "found": found.found, "value": found.value,
            "task": route.task, "partition": route.partition, "host": self.host.name,
            "epoch": model.epoch, "position": position, "committed_end": end,
            "lag": max(0, end - position), "consistency": "standby"})

    async def _standby_scan(self, request: web.Request) -> web.Response:
        """One task's entries in the bounds from this host's copy (a scan's part)."""
        store = request.match_info["store"]
        self.router.queryable(store)
        task = request.query.get("task")
        if not task:
            raise QueryError("the standby scan names no task; add ?task=<task name>")
        model = self.host.model
        if model is None:
            raise self._unavailable(f"host {self.host.name!r} has no job model yet")
        if task not in model.tasks:
            raise self._unavailable(f"task {task!r} is not in epoch {model.epoch} of "
                                    f"host {self.host.name!r}")
        view = self._copy(model, task, store)
        bounds = Scan(b64_param(request, "start"), b64_param(request, "end"),
                      after_of(request), limit_of(request))
        found, position = scan(view, bounds, "committed")  # synchronous, like a get
        end = await committed_end(self.system, self.config, task, store,
                                  model.tasks[task].changelog_partition)
        return json_response({
            "store": store, "task": task, "host": self.host.name, "epoch": model.epoch,
            "entries": [{"raw": b64(raw), "key": key, "value": value, "task": task}
                        for raw, key, value in found],
            "full": len(found) >= bounds.limit, "position": position or 0,
            "committed_end": end, "lag": max(0, end - (position or 0)),
            "consistency": "standby"})

    def _copy(self, model: JobModel, task: str, store: str) -> TaskStore:
        """This host's standby copy of ``task``'s ``store``, read like the task's store."""
        replicas = self.host.replicas
        engine = replicas.copy_of(task, store) if replicas is not None else None
        if engine is None or self.host.name not in model.standbys.get(task, ()):
            raise self._unavailable(f"host {self.host.name!r} keeps no standby copy of "
                                    f"store {store!r} of task {task!r} now")
        spec = self.router.queryable(store)
        return TaskStore(store, engine, get_serde(spec.key_serde, search_path=self.config.root),
                         get_serde(spec.value_serde, search_path=self.config.root), task=task)

    def _unavailable(self, why: str) -> TaskUnavailableError:
        return TaskUnavailableError(f"{why}; retry after {self.settings.retry_after_ms} ms",
                                    self.settings.retry_after_ms)

