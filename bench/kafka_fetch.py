"""CPU per record of a worker's read on Apache Kafka: `KafkaConsumer.fetch_raw` and the
rows as the worker's dispatch reads them, nothing else (no task, no store, no produce).

Writes ``--records`` JSON records of the per-key sum's shape (`bench.worker`) into a
4-partition topic of a broker given with ``--bootstrap`` (e.g. ``python
tests/kafka_broker.py --port 0``), unless ``--topic`` names one already written, then
reads them all ``--rounds`` times and prints the process's CPU µs per record (every
thread) and the records/s of each read. Run the same command from two checkouts one after
the other (``PYTHONPATH=<checkout>``) for a before/after of the read path.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
import uuid
from operator import attrgetter
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from framework.systems.base import ProducerRecord
from framework.systems.fetched import FetchedColumns
from framework.systems.kafka.system import KafkaSystem
from groupers import SystemStreamPartition

PARTITIONS = 4
_fields = attrgetter("offset", "key", "value", "timestamp", "headers")


async def _write(bootstrap: str, topic: str, count: int) -> None:
    system = KafkaSystem("kafka", bootstrap)
    await system.start()
    try:
        await system.create_stream(topic, PARTITIONS)
        rng = random.Random(7)
        for at in range(0, count, 10_000):
            await system.produce([
                ProducerRecord(topic, f"key-{rng.randrange(2_000):05d}".encode(),
                               json.dumps({"amount": rng.randint(1, 9)}).encode())
                for _ in range(min(10_000, count - at))])
    finally:
        await system.close()


async def _read(bootstrap: str, topic: str, count: int) -> tuple[float, float]:
    """(CPU µs per record, records/s) of one read of ``count`` records."""
    system = KafkaSystem("kafka", bootstrap)
    await system.start()
    consumer = system.consumer()
    try:
        consumer.assign({SystemStreamPartition("kafka", topic, p): 0
                         for p in range(PARTITIONS)})
        fetch = consumer.fetch_raw  # type: ignore[attr-defined]
        await fetch(1, 100)  # connected and assigned before the clock starts
        seen, checksum = 0, 0
        cpu, wall = time.process_time(), time.perf_counter()
        while seen < count:
            for records in (await fetch(5_000, 200)).values():
                rows = (records.rows() if type(records) is FetchedColumns
                        else map(_fields, records))
                for offset, _key, _value, _timestamp, _headers in rows:
                    checksum += offset
                seen += len(records)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    finally:
        await consumer.close()
        await system.close()
    return cpu / seen * 1e6, seen / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", help="a topic this bench wrote before (else a new one)")
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    topic = args.topic or f"fetch-bench-{uuid.uuid4().hex[:8]}"
    if not args.topic:
        asyncio.run(_write(args.bootstrap, topic, args.records))
        print(f"wrote {args.records:,} records to {topic}")
    for _ in range(args.rounds):
        cpu, rate = asyncio.run(_read(args.bootstrap, topic, args.records))
        print(f"read {args.records:,} records: {cpu:.2f} CPU µs/record, {rate:,.0f} records/s",
              flush=True)


if __name__ == "__main__":
    main()
