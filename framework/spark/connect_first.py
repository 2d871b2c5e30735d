"""Run a pyspark module that Spark starts as a process of its own (not forked from its
daemon), connecting back to the JVM before importing the module.

Spark 4.3 gives such a process a fixed 10 s to connect back (no setting raises it), and
the module's imports come first: pyspark, pyarrow. On a machine whose run queue is ten
deep that can take longer — the streaming source's runner then fails with "Python worker
failed to connect back". Here the process connects and authenticates first, with the
standard library only; the imports then fall under `spark.python.authenticate.socketTimeout`
and the JVM's wait for the module's first answer. The launcher (`framework.spark.workers`)
runs this file by path, so that no sampan or pyspark module is imported before it.

Usage: ``python -P connect_first.py MODULE`` with Spark's ``PYTHON_WORKER_FACTORY_*``
environment; without a TCP port and secret there it runs ``MODULE`` as Spark would.
"""

from __future__ import annotations

import importlib
import os
import runpy
import socket
import struct
import sys
from typing import BinaryIO, cast

_INT = struct.Struct("!i")


def _connect(port: int) -> socket.socket:
    host = "::1" if os.environ.get("SPARK_PREFER_IPV6", "false").lower() == "true" else "127.0.0.1"
    sock = socket.create_connection((host, port))
    sock.settimeout(int(os.environ.get("SPARK_AUTH_SOCKET_TIMEOUT", 15)))
    return sock


def _authenticate(stream: BinaryIO, secret: str) -> None:
    """Spark's SocketAuthHelper handshake (as `pyspark.util._do_server_auth`)."""
    token = secret.encode("utf-8")
    stream.write(_INT.pack(len(token)) + token)
    stream.flush()
    [length] = _INT.unpack(stream.read(_INT.size))
    if stream.read(length) != b"ok":
        raise SystemExit("connect_first: the JVM refused this worker's secret")


def main() -> None:
    module = sys.argv[1]
    port = os.environ.get("PYTHON_WORKER_FACTORY_PORT")
    secret = os.environ.get("PYTHON_WORKER_FACTORY_SECRET")
    if port is None or secret is None or "PYTHON_WORKER_FACTORY_SOCK_PATH" in os.environ:
        sys.argv = [module, *sys.argv[2:]]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return
    sock = _connect(int(port))
    stream = cast(BinaryIO, sock.makefile("rwb", int(os.environ.get("SPARK_BUFFER_SIZE", 65536))))
    _authenticate(stream, secret)
    stream.write(_INT.pack(os.getpid()))  # as pyspark.worker_util.get_sock_file_to_executor
    stream.flush()
    sock.settimeout(None)  # the runner waits on the JVM for as long as the query runs
    worker = importlib.import_module(module)
    try:
        worker.main(stream, stream)
    finally:
        stream.close()


if __name__ == "__main__":
    main()
