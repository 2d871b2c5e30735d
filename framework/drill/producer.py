"""The drill's producer: a scenario's records at a steady rate."""

from __future__ import annotations

import asyncio
import time

from framework.drill.scenario import Scenario
from framework.systems.base import System

TICK_S = 0.05


class PacedProducer:
    """Writes ``records`` of ``scenario``'s workload at ``rate`` records per second, never
    past ``allowed``: the drill's next expansion point, where it expands the stream, so every
    record is placed by a partition count the drill's own system has seen (none is written
    with the old count after the expansion, as by a producer with stale metadata), and a
    producer that fell behind on a busy machine never bursts past it. Held there, it paces
    again from where it stood once ``allowed`` grows."""

    def __init__(self, system: System, scenario: Scenario, *, records: int, rate: int) -> None:
        self.system = system
        self.scenario = scenario
        self.records = records
        self.rate = rate
        self.produced = 0
        self.allowed = records

    async def run(self) -> None:
        """Produce everything, pacing to the rate; returns when all records are written."""
        start, base = time.monotonic(), self.produced
        while self.produced < self.records:
            if self.produced >= self.allowed:  # held: pace again from where it stands
                start, base = time.monotonic(), self.produced
            else:
                due = min(self.records, self.allowed,
                          base + int((time.monotonic() - start) * self.rate) + 1)
                if due > self.produced:
                    await self.system.produce(self.scenario.records(due - self.produced))
                    self.produced = due
            await asyncio.sleep(TICK_S)
