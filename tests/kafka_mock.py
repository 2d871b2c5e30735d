"""A transaction-capable Kafka for tests: librdkafka's mock cluster in a subprocess.

The ``confluent-kafka`` wheel ships librdkafka, whose ``rd_kafka_mock_*`` functions run
an in-process Kafka cluster. `start_mock_cluster` runs this module as a child process
that loads that library with ctypes, starts a one-broker mock cluster listening on
127.0.0.1 only, prints its bootstrap address and then creates topics on request (one
``topic NAME PARTITIONS`` line on its stdin per topic). `MockCluster.stop` closes its
stdin and waits (SIGKILL after a timeout). `kafka_mock` is the session fixture.

What the mock cluster (librdkafka 2.16) does **not** do, and what sampan makes of it:

- **No CreateTopics, DescribeConfigs or CreatePartitions.** Tests create every topic
  through `MockCluster.create_topic` before a job starts (sampan's admin then finds it
  and sends no CreateTopics); no topic configs exist, so nothing is compacted and
  ``cleanup.policy`` reads as ``delete``; expansion cannot be tested here.
- **Auto-creation.** A produce or metadata request naming an unknown topic creates it
  with 4 partitions; sampan never names a topic it has not seen in the topic list.
- **Fetch ignores ``isolation_level``.** A Fetch response carries no aborted
  transactions and gives the high watermark as last stable offset, so a broker-side
  read_committed filter does not exist. The mock does write COMMIT/ABORT control
  batches; sampan's consumer applies read_committed itself from them
  (`framework.systems.kafka.txn_filter`).
- **InitProducerId never fences by transactional id**: a second producer with the same
  ``transactional.id`` gets a *new* producer id and the old one stays valid, and an
  open transaction is not aborted. Only the explicit epoch bump (InitProducerId v3 with
  the current producer id and epoch, KIP-360) fences; sampan records every worker's
  producer id and bumps it from the replacement (`framework.systems.kafka.fencing`).
- **Control batches carry a zero CRC**: sampan checks the CRC of data batches only.
- **No transaction timeout**: a transaction left open by a killed process stays open
  until someone bumps its producer and aborts it; meanwhile readers of a partition it
  shares with other writers are held behind it, as behind a last stable offset.
- **One record batch per Fetch response**: reads are slower than on tansu.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

__all__ = ["MockCluster", "kafka_mock", "start_mock_cluster", "transaction_cases"]

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


class MockStartError(RuntimeError):
    """The mock cluster process did not come up or refused a request."""


def _librdkafka() -> ctypes.CDLL:
    """The librdkafka shared library bundled in the confluent-kafka wheel."""
    import confluent_kafka

    package = Path(confluent_kafka.__file__).resolve().parent
    candidates = sorted((package.parent / "confluent_kafka.libs").glob("librdkafka*.so*"))
    if not candidates:
        raise MockStartError(f"no librdkafka in {package.parent / 'confluent_kafka.libs'}; "
                             "install confluent-kafka (the dev extra) from a manylinux wheel")
    lib = ctypes.CDLL(str(candidates[0]))
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_conf_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                      ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p,
                                 ctypes.c_size_t]
    lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
    lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_topic_create.restype = ctypes.c_int
    lib.rd_kafka_mock_topic_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                               ctypes.c_int, ctypes.c_int]
    lib.rd_kafka_mock_set_controller_id.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
    return lib


def _serve() -> int:
    """The child process: own one mock cluster, create topics asked for on stdin."""
    lib = _librdkafka()
    errstr = ctypes.create_string_buffer(512)
    conf = lib.rd_kafka_conf_new()
    for key, value in ((b"log_level", b"3"), (b"client.id", b"sampan-mock-owner")):
        if lib.rd_kafka_conf_set(conf, key, value, errstr, len(errstr)) != 0:
            print(f"error conf {key!r}: {errstr.value.decode()}", flush=True)
            return 1
    handle = lib.rd_kafka_new(0, conf, errstr, len(errstr))  # 0 = RD_KAFKA_PRODUCER
    if not handle:
        print(f"error rd_kafka_new: {errstr.value.decode()}", flush=True)
        return 1
    cluster = lib.rd_kafka_mock_cluster_new(handle, 1)
    if not cluster:
        print("error rd_kafka_mock_cluster_new failed", flush=True)
        return 1
    lib.rd_kafka_mock_set_controller_id(cluster, 1)
    print("bootstrap", lib.rd_kafka_mock_cluster_bootstraps(cluster).decode(), flush=True)
    for line in sys.stdin:
        parts = line.split()
        if len(parts) == 3 and parts[0] == "topic":
            code = lib.rd_kafka_mock_topic_create(cluster, parts[1].encode(), int(parts[2]), 1)
            print("ok" if code == 0 else f"error {code}", flush=True)
        elif parts:
            print(f"error unknown request {line.strip()!r}", flush=True)
    lib.rd_kafka_mock_cluster_destroy(cluster)
    lib.rd_kafka_destroy(handle)
    return 0


@dataclass
class MockCluster:
    """A running mock-cluster process; ``bootstrap`` is what Kafka clients connect to."""

    process: subprocess.Popen[str]
    bootstrap: str
    _lock: threading.Lock = field(default_factory=threading.Lock)
    created: set[str] = field(default_factory=set)

    def create_topic(self, name: str, partitions: int) -> None:
        """Create ``name`` with ``partitions`` partitions (no-op when this fixture made it)."""
        with self._lock:
            if name in self.created:
                return
            stdin, stdout = self._pipes()
            stdin.write(f"topic {name} {partitions}\n")
            stdin.flush()
            answer = stdout.readline().strip()
            if answer != "ok":
                raise MockStartError(f"mock cluster could not create topic {name!r}: "
                                     f"{answer or 'no answer (process exited?)'}")
            self.created.add(name)

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        assert self.process.stdin is not None and self.process.stdout is not None
        return self.process.stdin, self.process.stdout

    def stop(self) -> None:
        """End the process: close its stdin, then SIGKILL if it lingers; idempotent."""
        if self.process.poll() is None:
            try:
                self._pipes()[0].close()
                self.process.wait(STOP_TIMEOUT_S)
            except (OSError, subprocess.TimeoutExpired):
                self.process.send_signal(signal.SIGKILL)
                self.process.wait(STOP_TIMEOUT_S)


def start_mock_cluster() -> MockCluster:
    """Start the mock cluster process and wait for its bootstrap address."""
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--serve"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(process.stdout.readline()),  # type: ignore[union-attr]
                              daemon=True)
    reader.start()
    reader.join(READY_TIMEOUT_S)
    first = lines[0].strip() if lines else ""
    if not first.startswith("bootstrap "):
        process.kill()
        process.wait(STOP_TIMEOUT_S)
        raise MockStartError(f"mock cluster did not start: {first or 'no output'}")
    bootstrap = first.split()[1]
    if not bootstrap.startswith("127.0.0.1:"):
        process.kill()
        process.wait(STOP_TIMEOUT_S)
        raise MockStartError(f"mock cluster listens on {bootstrap}, not 127.0.0.1")
    return MockCluster(process, bootstrap)


@pytest.fixture(scope="session")
def kafka_mock() -> Iterator[MockCluster]:
    """One mock cluster for the whole test session, stopped when the session ends."""
    cluster = start_mock_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()


if __name__ == "__main__" and sys.argv[1:] == ["--serve"]:
    sys.exit(_serve())


@asynccontextmanager
async def transaction_cases(cluster: MockCluster, prefix: str
                            ) -> AsyncIterator[tuple[str, Callable[[], Awaitable[None]]]]:
    """A new one-partition topic holding, by offset: 0 committed, 1 its COMMIT marker,
    2 aborted, 3 its ABORT marker, 4 a plain (non-transactional) record, 5 a record of a
    transaction still open; yields the topic and the call that commits it (marker at 6)."""
    from aiokafka import AIOKafkaProducer

    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 1)
    producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap,
                                transactional_id=f"{topic}-txn")
    plain = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap)
    await producer.start()
    await plain.start()
    try:
        async with producer.transaction():
            await producer.send_and_wait(topic, b"committed", partition=0)
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"aborted", partition=0)
        await producer.abort_transaction()
        await plain.send_and_wait(topic, b"plain", partition=0)
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"open", partition=0)
        yield topic, producer.commit_transaction
    finally:
        await plain.stop()
        await producer.stop()
