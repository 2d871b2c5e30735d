"""Where a restore from Kafka spends its time: a py-spy profile of `bench.kafka_restore`
folded into steps.

Record one round, then fold:

    py-spy record -r 200 --nonblocking --format raw -o /tmp/restore.txt -- \\
        .venv/bin/python -m bench.kafka_restore --records 300000 --rounds 1
    .venv/bin/python -m bench.restore_profile /tmp/restore.txt

Samples of the setup (the broker, the data, writing the changelog, the raw puts, imports)
are left out; every other sample goes to the step of the innermost frame of its stack
that names one (`STEPS`), else to the event loop, GC and the rest.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

__all__ = ["STEPS", "fold"]

SETUP = (r"_write \(.*kafka_restore|_raw_put|kafka_broker\.py|running_kafka|_data \(|"
         r"raw_put_rate|<frozen importlib|_system \(.*kafka_restore|rmtree")
STEPS: list[tuple[str, str]] = [
    ("a Record per record (as_record)",
     r"as_record|__init__ \(<string>|framework/systems/base\.py"),
    ("columns from the fetched records",
     r"<listcomp> \(framework/systems/reading\.py|read_columns_range"),
    ("read_range's filter", r"read_range \("),
    ("aiokafka: unpack fetched batches", r"_unpack_records|aiokafka/record/|txn_filter"),
    ("RocksDB writes (writer thread)", r"write_pairs|write_batch|framework/stores/rocksdb\.py"),
    ("aiokafka: fetch, network", r"aiokafka/|fetch_raw|kafka/consumer\.py"),
    ("restore loop (add, batching)", r"framework/stores/restore\.py"),
]
OTHER = "event loop, GC, other"


def fold(raw: Path) -> tuple[Counter[str], int]:
    """(samples per step, setup samples left out) of a py-spy ``--format raw`` file."""
    steps: Counter[str] = Counter()
    setup = 0
    for line in raw.read_text(errors="replace").split("\n"):
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        if re.search(SETUP, stack):
            setup += int(count)
            continue
        step = OTHER
        for frame in reversed(stack.split(";")):
            hit = next((name for name, pattern in STEPS if re.search(pattern, frame)), None)
            if hit is not None:
                step = hit
                break
        steps[step] += int(count)
    return steps, setup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw", type=Path, help="py-spy --format raw output")
    steps, setup = fold(parser.parse_args().raw)
    total = sum(steps.values()) or 1
    print(f"{total:,} samples of the restore ({setup:,} of setup left out)")
    for step, count in steps.most_common():
        print(f"  {step:45} {count / total:6.1%}")


if __name__ == "__main__":
    main()
