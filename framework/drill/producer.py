"""The drill's producer: a scenario's records at a steady rate."""

from __future__ import annotations

import asyncio
import time

from framework.drill.scenario import Scenario
from framework.systems.base import System

TICK_S = 0.05


class PacedProducer:
    """Writes ``records`` of ``scenario``'s workload at ``rate`` records per second.

    `hold_at` stops it at an exact record count (the drill expands the stream there, so
    every record is placed by a partition count the drill's own system has seen: none is
    written with the old count after the expansion, as by a producer with stale metadata);
    `release` lets it go on, paced from then.
    """

    def __init__(self, system: System, scenario: Scenario, *, records: int, rate: int) -> None:
        self.system = system
        self.scenario = scenario
        self.records = records
        self.rate = rate
        self.produced = 0
        self.limit = records

    def hold_at(self, count: int) -> None:
        """Produce at most ``count`` records until `release`."""
        self.limit = min(count, self.records)

    def release(self) -> None:
        self.limit = self.records

    async def run(self) -> None:
        """Produce everything, pacing to the rate; returns when all records are written."""
        start, base = time.monotonic(), self.produced
        while self.produced < self.records:
            if self.produced >= self.limit:  # held: pace again from the release
                start, base = time.monotonic(), self.produced
            else:
                due = min(self.limit, base + int((time.monotonic() - start) * self.rate) + 1)
                if due > self.produced:
                    await self.system.produce(self.scenario.records(due - self.produced))
                    self.produced = due
            await asyncio.sleep(TICK_S)
