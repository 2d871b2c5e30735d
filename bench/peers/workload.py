"""The per-key sum workload every peer runs, and its ground truth.

Records are ``(key, value)`` pairs in the order they are produced: string keys
``key-00000``…, JSON values ``{"amount": n}`` with ``n`` in 1..9 (`bench.worker`'s data).
Kafka keeps a key's records in produce order within its partition, so a correct per-key
sum emits, for each key, exactly the running totals of its amounts in that order: that
list is the key's ground truth.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Workload", "make_workload", "running_totals"]


@dataclass(frozen=True)
class Workload:
    """Input records in produce order (keys and values as bytes)."""

    records: Sequence[tuple[bytes, bytes]]

    def __len__(self) -> int:
        return len(self.records)

    def truth(self) -> dict[str, list[int]]:
        """Key → every total a correct job sends for it, in order."""
        return running_totals(self.records)

    def slice(self, start: int, stop: int) -> Workload:
        return Workload(self.records[start:stop])


def running_totals(records: Iterable[tuple[bytes, bytes]]) -> dict[str, list[int]]:
    """Key → running totals of ``value["amount"]``, one per record, in record order."""
    totals: dict[str, list[int]] = {}
    for key, value in records:
        seen = totals.setdefault(key.decode(), [])
        seen.append((seen[-1] if seen else 0) + json.loads(value)["amount"])
    return totals


def make_workload(count: int, keys: int, seed: int = 7) -> Workload:
    """``count`` records over ``keys`` keys, reproducible from ``seed``."""
    rng = random.Random(seed)
    names = [f"key-{n:05d}".encode() for n in range(keys)]
    return Workload([(rng.choice(names), json.dumps({"amount": rng.randint(1, 9)}).encode())
                     for _ in range(count)])
