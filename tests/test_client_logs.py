"""aiokafka's own log lines stay out of the way (`framework.client_logs`): a retry that
resolves itself at DEBUG, one that persists as one sampan line, ``Unable connect to …``
never — and sampan's own error says what failed."""

from __future__ import annotations

import ast
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import aiokafka
import pytest

from framework.client_logs import _RETRIES, ClientLogGate

REPO = Path(__file__).resolve().parents[1]
GROUP_LOG = "aiokafka.consumer.group_coordinator"
REBALANCING = "Heartbeat failed for group %s because it is rebalancing"


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound once, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("command", [["run", "job.toml"],
                                     ["streams", "list", "--job", "job.toml"]])
def test_a_broker_refusing_connections_is_said_by_sampan_not_by_aiokafka(
        tmp_path: Path, command: list[str]) -> None:
    port = closed_port()
    (tmp_path / "job.toml").write_text(f"""\
[job]
name = "closed"
task = "framework.drill.sum_task:SumTask"
inputs = ["kafka.in"]

[systems.kafka]
type = "kafka"
bootstrap = "127.0.0.1:{port}"

[streams."kafka.in"]
partitions = 2

[stores.totals]
""")
    done = subprocess.run([sys.executable, "-m", "framework.cli", *command], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2, done.stderr
    assert "Unable connect" not in done.stderr, done.stderr
    last = done.stderr.splitlines()[-1]
    assert last.startswith(f"sampan {command[0]}: error: Kafka at 127.0.0.1:{port} "
                           "(system 'kafka'): "), done.stderr


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def gated() -> Iterator[tuple[Clock, list[str]]]:
    """aiokafka's group-coordinator logger through a gate on a fake clock; the lines it
    lets through at INFO (level and message)."""
    clock, lines = Clock(), []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(f"{record.levelname} {record.getMessage()}")

    capture = Capture()
    capture.addFilter(ClientLogGate(clock=clock))
    library = logging.getLogger("aiokafka")
    saved = library.handlers, library.propagate, library.level
    library.handlers, library.propagate = [capture], False
    library.setLevel(logging.WARNING)
    try:
        yield clock, lines
    finally:
        library.handlers, library.propagate = saved[0], saved[1]
        library.setLevel(saved[2])


def test_a_rebalance_that_ends_within_the_bound_stays_at_debug(
        gated: tuple[Clock, list[str]]) -> None:
    clock, lines = gated
    for second in (0, 3, 6, 9):
        clock.now = second
        logging.getLogger(GROUP_LOG).warning(REBALANCING, "job-hosts")
    assert lines == []


def test_a_rebalance_that_lasts_is_said_once_per_episode(
        gated: tuple[Clock, list[str]]) -> None:
    """Heartbeats answered "rebalancing" every 3 s: one sampan line at 12 s, none after;
    after 30 s without it, a new rebalance lasting as long is said again."""
    clock, lines = gated
    for second in (0, 3, 6, 9, 12, 15, 18, 60, 63, 66, 69, 72):
        clock.now = second
        logging.getLogger(GROUP_LOG).warning(REBALANCING, "job-hosts")
    said = ("WARNING Kafka: group job-hosts has been rebalancing for 12 s; this process "
            "waits for the round to end")
    assert lines == [said, said]


def test_a_coordinator_not_available_for_long_is_one_line_naming_the_error(
        gated: tuple[Clock, list[str]]) -> None:
    clock, lines = gated
    for second in range(0, 13):
        clock.now = second
        logging.getLogger(GROUP_LOG).error("Group Coordinator Request failed: %s",
                                           "[Error 15] CoordinatorNotAvailableError")
    assert lines == [
        "WARNING Kafka has had no coordinator for this process's group for 10 s ([Error 15] "
        "CoordinatorNotAvailableError); it keeps asking (a broker starting, or the group's "
        "__consumer_offsets partition without a leader) and the process waits for it"]


def test_writes_retried_while_a_leader_moves_are_said_per_partition_once_they_last(
        gated: tuple[Clock, list[str]]) -> None:
    """Partition 2's leader is back after 4 s (its retries stop): nothing said; partition
    1's retries go on: one line at 10 s."""
    clock, lines = gated
    sender = logging.getLogger("aiokafka.producer.sender")
    message = "Got error produce response on topic-partition %s, retrying. Error: %s"
    for second in range(0, 14, 2):
        clock.now = second
        sender.warning(message, "TopicPartition(topic='in', partition=1)",
                       "NotLeaderForPartitionError")
        if second <= 4:
            sender.warning(message, "TopicPartition(topic='in', partition=2)",
                           "NotLeaderForPartitionError")
    assert lines == [
        "WARNING Kafka: writes to TopicPartition(topic='in', partition=1) have been retried "
        "for 10 s (NotLeaderForPartitionError): its leader is moving or unavailable; the "
        "records wait, none is lost"]


def test_unable_to_connect_is_never_said_however_long_it_lasts(
        gated: tuple[Clock, list[str]]) -> None:
    clock, lines = gated
    client = logging.getLogger("aiokafka.client")
    for second in range(0, 120, 5):
        clock.now = second
        client.error('Unable connect to "%s:%s": %s', "127.0.0.1", 1, "Connect call failed")
        client.error("Unable connect to node with id %s: %s", 1, "Connect call failed")
    assert lines == []


def test_other_client_lines_are_throttled_warnings(gated: tuple[Clock, list[str]]) -> None:
    _, lines = gated
    for _ in range(3):
        logging.getLogger("aiokafka.conn").error("Something new went wrong: %s", "x")
    assert lines == ["WARNING Something new went wrong: x"]


def _aiokafka_messages() -> set[str]:
    """Every message format aiokafka's source passes to a ``log.<level>(…)`` call."""
    found = set()
    for path in Path(aiokafka.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                    isinstance(node.func.value, ast.Name) and node.func.value.id == "log"
                    ) and node.args and isinstance(node.args[0], ast.Constant):
                found.add(str(node.args[0].value))
    return found


def test_every_message_the_gate_knows_is_one_the_installed_aiokafka_logs() -> None:
    """A message aiokafka rewords falls back to the throttle: this says which one."""
    assert set(_RETRIES) - _aiokafka_messages() == set()
