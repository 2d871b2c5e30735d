"""The /metrics endpoint: serves a registry, and `close` ends its thread and frees the port
(woken at once rather than at its next poll; no timing is asserted here)."""

from __future__ import annotations

import socket
import threading
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, Counter

from framework.metrics.server import endpoint_url, serve


def test_close_ends_the_server_thread_and_frees_the_port() -> None:
    registry = CollectorRegistry()
    Counter("sampan_probe", "a probe", registry=registry).inc(3)
    before = set(threading.enumerate())
    server = serve(registry, "127.0.0.1", 0, "test")
    serving = [t for t in set(threading.enumerate()) - before  # its thread, nothing else
               if "serve_forever" in t.name]
    with urllib.request.urlopen(server.url, timeout=10) as response:
        assert "sampan_probe_total 3.0" in response.read().decode()
    server.close()
    assert serving and not any(thread.is_alive() for thread in serving)
    with socket.socket() as probe:  # free again for a listener (as the next worker's)
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", server.port))
        probe.listen()
    with pytest.raises(OSError):
        urllib.request.urlopen(server.url, timeout=2)


@pytest.mark.parametrize(("bind", "url"), [
    ("0.0.0.0", "http://127.0.0.1:9/metrics"), ("", "http://127.0.0.1:9/metrics"),
    ("::", "http://[::1]:9/metrics"), ("fe80::1", "http://[fe80::1]:9/metrics"),
    ("[::1]", "http://[::1]:9/metrics"), ("127.0.0.2", "http://127.0.0.2:9/metrics")])
def test_the_url_names_a_reachable_address(bind: str, url: str) -> None:
    assert endpoint_url(bind, 9) == url
