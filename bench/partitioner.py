"""Partitioner benchmark: our murmur2 against aiokafka's, and the memo of repeated keys.

Prints keys/s for: aiokafka's ``murmur2`` (byte at a time), ours uncached (4 bytes a
step via one ``struct`` unpack), and `partition_for_key` on unique keys (every lookup
misses the memo) and on 1,000 hot keys repeated (every lookup but the first hits it).

Run: ``.venv/bin/python -m bench.partitioner`` (or ``python bench/partitioner.py``).
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from aiokafka.partitioner import murmur2 as aiokafka_murmur2

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from framework import partitioner
from framework.partitioner import murmur2, partition_for_key


def rate(function: Callable[[bytes], object], keys: Sequence[bytes]) -> float:
    """Keys per second, best of three passes."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for key in keys:
            function(key)
        best = min(best, time.perf_counter() - start)
    return len(keys) / best


def unique_rate(keys: Sequence[bytes]) -> float:
    """`partition_for_key` with an empty memo on every pass: all misses."""
    best = float("inf")
    for _ in range(3):
        partitioner._cache.clear()
        start = time.perf_counter()
        for key in keys:
            partition_for_key(key, 12)
        best = min(best, time.perf_counter() - start)
    return len(keys) / best


def main() -> None:
    rng = random.Random(7)
    short = [f"user-{n}".encode() for n in range(200_000)]
    long = [rng.randbytes(36) for _ in range(100_000)]
    hot = [f"word-{rng.randrange(1000)}".encode() for _ in range(200_000)]
    rows = [
        ("aiokafka murmur2, ~10-byte keys", rate(aiokafka_murmur2, short)),
        ("sampan murmur2,   ~10-byte keys", rate(murmur2, short)),
        ("aiokafka murmur2, 36-byte keys", rate(aiokafka_murmur2, long)),
        ("sampan murmur2,   36-byte keys", rate(murmur2, long)),
        ("partition_for_key, unique keys", unique_rate(short)),
        ("partition_for_key, 1,000 hot keys", rate(lambda k: partition_for_key(k, 12), hot)),
    ]
    for label, keys_per_s in rows:
        print(f"{label:<36} {keys_per_s / 1e6:6.2f} M keys/s")


if __name__ == "__main__":
    main()
