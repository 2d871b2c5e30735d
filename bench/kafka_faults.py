"""Broker failures on Apache Kafka: how long a running job takes to process again.

    python -m bench.kafka_faults outage [--runs K] [--outage-s S] [--guarantee G]
    python -m bench.kafka_faults failover [--runs K] [--guarantee G]

Each run is a fresh per-key sum job (`sampan run`, 2 workers, 4 partitions) on brokers this
script starts on 127.0.0.1 (Java 17+ and Maven, as the tests), fed 2,000 records and
fully committed before the fault.

- ``outage``: the only broker is stopped (SIGTERM) for ``--outage-s`` and started again on
  its log folders. Figure: from the broker serving metadata again to the first commit of
  new input (2,000 records produced as soon as it serves), and to all of them committed.
- ``failover``: a 3-node cluster (replication 3, min.insync.replicas 2); the node leading
  input partition 0 is SIGKILLed. Figure: from the kill to the first commit of new input
  (2,000 records produced right after the kill), and to all of them committed.

Prints each run and the medians. Timings include producing the records (some 0.1 s).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiokafka.errors import KafkaError

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]

from jobs import harness as h  # noqa: E402
from jobs import jobfiles as jf  # noqa: E402
from jobs import outputs as out  # noqa: E402
from jobs.outputs import checkpointed  # noqa: E402
from jobs.runs import SumRun  # noqa: E402
from kafka_broker import KafkaCluster, start_cluster, start_kafka  # noqa: E402

from framework.errors import SampanError  # noqa: E402

BATCH = 2_000
KEYS = 500


async def _leader_of(bootstrap: str, topic: str, partition: int) -> int:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        [described] = await admin.describe_topics([topic])
        return next(int(p["leader"]) for p in described["partitions"]
                    if p["partition"] == partition)
    finally:
        await admin.close()


async def _until(condition: Callable[[], Any], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.05)


async def _one(cluster: KafkaCluster, folder: Path, kind: str, guarantee: str,
               outage_s: float) -> tuple[float, float]:
    """(fault end → first new commit, → every new input committed) in seconds."""
    options = "replication_factor = 3" if kind == "failover" else ""
    run = SumRun(folder, cluster.bootstrap, guarantee=guarantee, client_options=options)
    config = run.config
    work = out.Workload(KEYS, stream=jf.streams(config)[0])
    run.start()
    meta = await h.open_meta(config)
    try:
        async def healthy() -> bool:
            return run.status()[0] == 0
        await _until(healthy, 240, "a healthy job")
        await h.produce(meta, work.records(BATCH))

        async def committed(target: int) -> bool:
            try:
                return await checkpointed(meta, config) >= target
            except (SampanError, KafkaError):  # the broker may be away
                return False
        await _until(lambda: committed(BATCH), 240, "the first batch committed")
        if kind == "outage":
            node = cluster.nodes[0]
            await meta.close()
            node.stop()
            await asyncio.sleep(outage_s)
            await asyncio.to_thread(cluster.start, node)
            start = time.monotonic()
            meta = await h.open_meta(config)
        else:
            victim = await _leader_of(cluster.bootstrap, jf.streams(config)[0], 0)
            cluster.node(victim).kill()
            start = time.monotonic()
        produced = await h.open_meta(config)
        try:
            await h.produce(produced, work.records(BATCH))
        finally:
            await produced.close()
        await _until(lambda: committed(BATCH + 1), 600, "the first new commit")
        first = time.monotonic() - start
        await _until(lambda: committed(2 * BATCH), 600, "every new input committed")
        every = time.monotonic() - start
        if kind == "failover":
            await asyncio.to_thread(cluster.start, cluster.node(victim))
        await run.stop()
        return first, every
    finally:
        run.kill()
        await meta.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("outage", "failover"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--outage-s", type=float, default=30.0)
    parser.add_argument("--guarantee", default="exactly-once",
                        choices=("exactly-once", "at-least-once"))
    args = parser.parse_args()
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # the bench's own clients
    with tempfile.TemporaryDirectory(prefix="sampan-bench-faults-") as tmp:
        cluster = (start_kafka(Path(tmp) / "kafka") if args.kind == "outage"
                   else start_cluster(3, Path(tmp) / "kafka"))
        firsts, everys = [], []
        try:
            for index in range(args.runs):
                first, every = asyncio.run(_one(cluster, Path(tmp) / f"run-{index}",
                                                args.kind, args.guarantee, args.outage_s))
                firsts.append(first)
                everys.append(every)
                print(f"run {index + 1}: first new commit {first:.1f} s, all {BATCH:,} "
                      f"committed {every:.1f} s", flush=True)
        finally:
            cluster.stop()
    what = ("broker back (serving metadata)" if args.kind == "outage"
            else "leader of input partition 0 SIGKILLed")
    print(f"{args.kind} ({args.guarantee}, median of {args.runs}): {what} → first new "
          f"commit {statistics.median(firsts):.1f} s, → {BATCH:,} new records committed "
          f"{statistics.median(everys):.1f} s")


if __name__ == "__main__":
    main()
