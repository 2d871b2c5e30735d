"""The suite's brokers die with whatever started them, the development broker the docs
offer (`python tests/kafka_broker.py`) serves until Ctrl-C, and they keep records of any
timestamp (no time retention)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import kafka_broker as brokers
import pytest
from polling import apoll

HERE = Path(__file__).resolve().parent


def _gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as stat:  # a zombie has exited too
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.1)
    return False


def test_a_process_spawned_for_a_broker_dies_when_its_starter_is_killed() -> None:
    starter = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; sys.path.insert(0, sys.argv[1]); "
         "import kafka_broker; child = kafka_broker.spawn(['sleep', '600']); "
         "print(child.pid, flush=True); time.sleep(600)", str(HERE)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert starter.stdout is not None
        child = int(starter.stdout.readline())
        assert not _gone(child, 0.5)  # it runs
        starter.kill()  # SIGKILL: no cleanup of its own runs
        starter.wait(30)
        assert _gone(child, 30), f"pid {child} outlived the process that started it"
    finally:
        starter.kill()


def test_a_process_spawned_from_a_thread_outlives_that_thread() -> None:
    """The parent-death signal follows the thread that forks: a broker started from a
    short-lived thread (``asyncio.to_thread``) must not die when the thread ends."""
    import threading

    import kafka_broker

    started: list[subprocess.Popen[bytes]] = []
    thread = threading.Thread(target=lambda: started.append(kafka_broker.spawn(["sleep", "60"])))
    thread.start()
    thread.join()
    child = started[0]
    try:
        assert not _gone(child.pid, 2), "the process died with the thread that started it"
    finally:
        child.kill()
        child.wait(10)


@pytest.mark.slow
@pytest.mark.kafka
def test_the_development_broker_serves_until_ctrl_c() -> None:
    problem = brokers.java_problem()
    if problem is not None:
        pytest.fail(f"Apache Kafka cannot run here: {problem}", pytrace=False)
    command = [sys.executable, str(HERE / "kafka_broker.py"), "--port", "0"]
    broker = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert broker.stdout is not None
        line = broker.stdout.readline()
        assert " is serving at 127.0.0.1:" in line, line
        bootstrap = line.split(" is serving at ")[1].split()[0]
        folder = line.split("(log: ")[1].split("/node-1/")[0]
        assert subprocess.run(["pgrep", "-f", folder], capture_output=True).returncode == 0

        async def topics() -> object:
            from aiokafka.admin import AIOKafkaAdminClient

            admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
            await admin.start()
            try:
                return await admin.list_topics()
            finally:
                await admin.close()

        assert asyncio.run(topics()) == []
        broker.send_signal(signal.SIGINT)
        assert broker.wait(60) == 0
        assert subprocess.run(["pgrep", "-f", folder], capture_output=True).returncode != 0
        assert not Path(folder).exists()
    finally:
        broker.kill()


@pytest.mark.slow
async def test_the_brokers_keep_records_stamped_in_1970(kafka_broker: brokers.KafkaBroker
                                                        ) -> None:
    """The drills' workloads stamp records with event times from 0: a broker deleting them
    by time (Kafka's default 7 days) loses a test's unread inputs. A topic given a retention
    of its own shows the broker's retention passes: once its third record is gone, a whole
    pass began after the kept record was written."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    name = f"stamped-1970-{uuid.uuid4().hex[:8]}"
    kept, trimmed = TopicPartition(name, 0), TopicPartition(f"{name}-trimmed", 0)
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(kept.topic, 1, 1), NewTopic(
            trimmed.topic, 1, 1, topic_configs={"retention.ms": "1000"})])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap)
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka_broker.bootstrap)
    await producer.start()
    await consumer.start()
    try:
        async def stamped_1970(tp: TopicPartition) -> None:
            await producer.send_and_wait(tp.topic, b"v", key=b"k", timestamp_ms=1_000)

        async def oldest(tp: TopicPartition) -> int:
            return int((await consumer.beginning_offsets([tp]))[tp])

        await stamped_1970(kept)
        for gone in (1, 2, 3):  # the first pass comes 30 s after the broker started
            await stamped_1970(trimmed)
            started = time.monotonic()
            while await oldest(trimmed) < gone:
                assert time.monotonic() - started < 120, "no retention pass within 120 s"
                await apoll(started)
        assert await oldest(kept) == 0, "the broker deleted records stamped in 1970"
    finally:
        await consumer.stop()
        await producer.stop()
