"""The drill's producer: keyed records at a steady rate, with the ground truth kept."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter

from framework.systems.base import ProducerRecord, System

TICK_S = 0.05


class GroundTruthProducer:
    """Writes ``records`` word records over ``keys`` words (skewed, seeded) at ``rate``/s.

    Each record's value carries the word's sequence number (1, 2, …), so a verifier can
    check both the final count and that no key's updates were reordered or repeated.
    """

    def __init__(self, system: System, stream: str, *, records: int, keys: int, rate: int,
                 seed: int) -> None:
        self.system = system
        self.stream = stream
        self.records = records
        self.rate = rate
        self._random = random.Random(seed)
        self._words = [f"word-{n:05d}" for n in range(keys)]
        self._weights = [1.0 / (n + 1) ** 0.6 for n in range(keys)]
        self.truth: Counter[str] = Counter()
        self.produced = 0

    async def run(self) -> None:
        """Produce everything, pacing to the rate; returns when all records are written."""
        start = time.monotonic()
        while self.produced < self.records:
            due = min(self.records, int((time.monotonic() - start) * self.rate) + 1)
            if due > self.produced:
                await self.system.produce(self._batch(due - self.produced))
            await asyncio.sleep(TICK_S)

    def _batch(self, size: int) -> list[ProducerRecord]:
        batch = []
        for word in self._random.choices(self._words, self._weights, k=size):
            self.truth[word] += 1
            value = json.dumps({"seq": self.truth[word]}).encode()
            batch.append(ProducerRecord(self.stream, word.encode(), value))
        self.produced += size
        return batch
