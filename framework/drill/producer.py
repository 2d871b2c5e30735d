"""The drill's producer: a scenario's records at a steady rate."""

from __future__ import annotations

import asyncio
import time

from framework.drill.scenario import Scenario
from framework.systems.base import System

TICK_S = 0.05


class PacedProducer:
    """Writes ``records`` of ``scenario``'s workload at ``rate`` records per second, never
    past ``allowed`` (the drill's next expansion point: a producer that fell behind on a
    busy machine catches up in a burst, which must not run past the expansion)."""

    def __init__(self, system: System, scenario: Scenario, *, records: int, rate: int) -> None:
        self.system = system
        self.scenario = scenario
        self.records = records
        self.rate = rate
        self.produced = 0
        self.allowed = records

    async def run(self) -> None:
        """Produce everything, pacing to the rate; returns when all records are written."""
        start = time.monotonic()
        while self.produced < self.records:
            due = min(self.records, self.allowed,
                      int((time.monotonic() - start) * self.rate) + 1)
            if due > self.produced:
                await self.system.produce(self.scenario.records(due - self.produced))
                self.produced = due
            await asyncio.sleep(TICK_S)
