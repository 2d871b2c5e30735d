"""The ``/metrics`` HTTP endpoint: prometheus-client's own server on a daemon thread."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server

from framework.errors import SampanError
from framework.metrics.targets import previous_port, write_target

__all__ = ["MetricsServer", "MetricsServerError", "serve"]

log = logging.getLogger(__name__)


class MetricsServerError(SampanError):
    """The metrics endpoint could not listen (port taken, address not on this machine)."""


@dataclass
class MetricsServer:
    """A running endpoint; `close` stops it and frees its port."""

    bind: str
    port: int
    _server: Any

    @property
    def url(self) -> str:
        return endpoint_url(self.bind, self.port)

    def close(self) -> None:
        """Stop serving and free the port. ``shutdown`` alone waits for the serving
        thread's next poll — up to half a second in which a stopping worker's event loop
        is blocked — so connections wake that thread until it has seen the request."""
        stopper = threading.Thread(target=self._server.shutdown, daemon=True)
        stopper.start()
        host = _connect_host(self.bind)
        while stopper.is_alive():
            with contextlib.suppress(OSError):
                socket.create_connection((host, self.port), timeout=0.1).close()
            stopper.join(0.02)
        self._server.server_close()


def _connect_host(bind: str) -> str:
    """The address to reach an endpoint listening on ``bind`` from this machine."""
    host = "127.0.0.1" if bind in ("0.0.0.0", "") else ("::1" if bind == "::" else bind)
    return host.strip("[]")


def endpoint_url(bind: str, port: int) -> str:
    """The URL to scrape an endpoint listening on ``bind:port`` from this machine."""
    host = _connect_host(bind)
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/metrics"


def serve(registry: CollectorRegistry, bind: str, port: int, who: str,
          target: Path | None = None, labels: dict[str, str] | None = None) -> MetricsServer:
    """Serve ``registry`` on ``bind:port``; ``who`` names it in errors. Port 0: the port
    the ``target`` file names (this process's last one) when it is free, else any free
    port. The ``target`` file (`framework.metrics.targets`) then names where it serves."""
    server = None
    previous = previous_port(target) if port == 0 and target is not None else None
    if previous:
        with contextlib.suppress(OSError):  # taken meanwhile: any free port will do
            server, _thread = start_http_server(previous, addr=bind, registry=registry)
    if server is None:
        try:
            server, _thread = start_http_server(port, addr=bind, registry=registry)
        except OSError as error:
            raise MetricsServerError(
                f"{who}: cannot serve /metrics on {bind}:{port} ({error.strerror or error}); "
                f"choose another [metrics] port (0 picks free ports) or set enabled = false"
            ) from None
    actual = int(server.server_port)
    log.info("%s serves metrics on %s", who, endpoint_url(bind, actual))
    if target is not None:
        try:
            write_target(target, _connect_host(bind), actual, labels or {})
        except OSError as error:  # for the scrape config; never stops the process
            log.warning("%s: cannot write the Prometheus target file %s: %s", who, target,
                        error)
    return MetricsServer(bind, actual, server)
