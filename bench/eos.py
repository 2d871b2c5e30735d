"""Exactly-once cost on Kafka: the per-key sum job on a real Apache Kafka broker, run with
``guarantee = "exactly-once"`` and ``"at-least-once"`` alternately in one process.

Run by hand: ``.venv/bin/python -m bench.eos [--records N] [--runs K] [--bootstrap H:P]``.
Each run is a fresh job (own topics) over the same N JSON records (4 partitions, 10k keys, a logged
RocksDB store, commit every 1 s); the figure is records/s from worker start to its final
commit, median of K runs per guarantee, and the median ratio of the K pairs (the two
runs of a pair are back to back, in alternating order, so machine load drifts less).
Without ``--bootstrap`` a one-node Apache Kafka (`tests/kafka_broker.py`, Java 17+ and
Maven) is started on 127.0.0.1 and stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from bench.kafka_args import add_client_options, client_options, job_line
from bench.worker import KEYS, PARTITIONS, TASK, _records, _run_worker
from framework.config import load_config
from framework.coordinator.builder import build_job_model
from framework.metadata import publish_model
from framework.systems import open_system
from framework.systems.base import ProducerRecord

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from kafka_broker import start_kafka

RECORDS = 300_000
RUNS = 5


async def _sum(bootstrap: str, folder: Path, guarantee: str,
               records: list[ProducerRecord], options: dict[str, Any]) -> float:
    """Records/s of one sum job under ``guarantee`` with its own topics."""
    name = f"bench-eos-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    (folder / "sum_task.py").write_text(TASK)
    (folder / "job.toml").write_text(f"""\
[job]
name = "{name}"
task = "sum_task:SumTask"
inputs = ["kafka.{name}-events"]
fetch_max_records = 5000
guarantee = "{guarantee}"

[systems.kafka]
type = "kafka"
bootstrap = "{bootstrap}"
{job_line(options)}
[streams."kafka.{name}-events"]
[streams."kafka.sums"]
[stores.totals]
""")
    config = load_config(folder / "job.toml")
    system = open_system(config.system("kafka"))
    await system.start()
    try:
        for stream in (f"{name}-events", "sums"):
            await system.create_stream(stream, PARTITIONS, exist_ok=True)
        model = build_job_model(config, {config.inputs[0]: PARTITIONS}, None)
        await system.create_stream(f"{name}-totals-changelog", model.changelog_partitions,
                                   compacted=True, exist_ok=True)
        await publish_model(system, config, model)
        events = [ProducerRecord(f"{name}-events", r.key, r.value) for r in records]
        for at in range(0, len(events), 10_000):
            await system.produce(events[at:at + 10_000])
        _, elapsed = await _run_worker(config, model, len(records))
    finally:
        await system.close()
    return len(records) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=RECORDS)
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--bootstrap", help="a running broker (default: start one)")
    add_client_options(parser)
    args = parser.parse_args()
    options = client_options(args)
    records = _records(args.records, KEYS)
    cluster = None if args.bootstrap else start_kafka()
    bootstrap = args.bootstrap or cluster.bootstrap
    rates: dict[str, list[float]] = {"exactly-once": [], "at-least-once": []}
    try:
        with tempfile.TemporaryDirectory(prefix="sampan-bench-eos-") as tmp:
            for run in range(args.runs):
                order = list(rates) if run % 2 == 0 else list(reversed(rates))
                for guarantee in order:  # alternate who goes first: the machine drifts
                    rate = asyncio.run(_sum(bootstrap, Path(tmp) / f"{guarantee}-{run}", guarantee,
                                            records, options))
                    rates[guarantee].append(rate)
                    print(f"run {run + 1} {guarantee:>13}: {rate:>10,.0f} records/s", flush=True)
    finally:
        if cluster is not None:
            cluster.stop()
    eos, alo = (statistics.median(rates[g]) for g in ("exactly-once", "at-least-once"))
    paired = statistics.median(e / a for e, a in zip(rates["exactly-once"],
                                                      rates["at-least-once"], strict=True))
    print(f"sum on Apache Kafka (one node), {args.records:,} records, median of {args.runs}:")
    print(f"  at-least-once: {alo:>10,.0f} records/s")
    print(f"  exactly-once:  {eos:>10,.0f} records/s ({eos / alo:.0%} of at-least-once; "
          "target: at most 15% slower)")
    print(f"  exactly-once / at-least-once, median of the {args.runs} paired runs: "
          f"{paired:.0%}")


if __name__ == "__main__":
    main()
