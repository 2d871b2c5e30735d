"""The ``/metrics`` HTTP endpoint: prometheus-client's own server on a daemon thread."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server

from framework.errors import SampanError

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


def serve(registry: CollectorRegistry, bind: str, port: int, who: str) -> MetricsServer:
    """Serve ``registry`` on ``bind:port`` (0: a free port); ``who`` names it in errors."""
    try:
        server, _thread = start_http_server(port, addr=bind, registry=registry)
    except OSError as error:
        raise MetricsServerError(
            f"{who}: cannot serve /metrics on {bind}:{port} ({error.strerror or error}); "
            f"choose another [metrics] port (0 picks free ports) or set enabled = false"
        ) from None
    actual = int(server.server_port)
    log.info("%s serves metrics on %s", who, endpoint_url(bind, actual))
    return MetricsServer(bind, actual, server)
