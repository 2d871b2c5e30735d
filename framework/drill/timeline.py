"""Sample a running job's committed progress and lag; plot them with expansions marked."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from framework.config import JobConfig
from framework.errors import StreamNotFoundError
from framework.systems.base import System

SAMPLE_S = 0.5


@dataclass
class Sample:
    t: float
    produced: int
    committed: int
    lag: int


@dataclass
class Timeline:
    """Samples over time plus marks (expansion requested, detected, resumed)."""

    start: float = field(default_factory=time.monotonic)
    samples: list[Sample] = field(default_factory=list)
    marks: list[tuple[float, str]] = field(default_factory=list)

    def mark(self, label: str) -> None:
        self.marks.append((time.monotonic() - self.start, label))

    def throughput(self, t0: float, t1: float) -> float | None:
        """Committed records per second between two times (None without samples)."""
        inside = [s for s in self.samples if t0 <= s.t <= t1]
        if len(inside) < 2 or inside[-1].t <= inside[0].t:
            return None
        return (inside[-1].committed - inside[0].committed) / (inside[-1].t - inside[0].t)


async def committed_and_end(system: System, config: JobConfig) -> tuple[int, int]:
    """Σ committed input positions and Σ input end offsets, each input record counted once.

    A grouped input partition is read by one task; a broadcast partition by every task, so
    its committed position is the least any task has reached.
    """
    checkpoints = await system.read_checkpoints(config.name)
    grouped = {config.stream(q).stream for q in config.inputs}
    broadcast = {config.stream(q).stream for q in config.broadcast_inputs}
    committed = 0
    least: dict[tuple[str, int], int] = {}
    for checkpoint in checkpoints.values():
        for ssp, offset in checkpoint.inputs.items():
            if ssp.stream in grouped:
                committed += offset
            elif ssp.stream in broadcast:
                where = (ssp.stream, ssp.partition)
                least[where] = min(offset, least.get(where, offset))
    committed += sum(least.values())
    end = 0
    made = {config.stream(q).stream for q in config.intermediate_streams}
    for stream in grouped | broadcast:
        try:
            end += sum(r.end for r in (await system.offsets(stream)).values())
        except StreamNotFoundError:
            if stream not in made:
                raise  # a pipeline's intermediate stream appears when `sampan run` starts
    return committed, end


async def source_end(system: System, config: JobConfig) -> int:
    """Σ end offsets of the job's inputs that it does not write itself (a pipeline's
    intermediate streams left out): what a drill's producer wrote."""
    written = set(config.intermediate_streams)
    end = 0
    for qualified in (*config.inputs, *config.broadcast_inputs):
        if qualified not in written:
            end += sum(r.end for r in (await system.offsets(config.stream(qualified).stream)
                                       ).values())
    return end


async def sample_forever(system: System, config: JobConfig, timeline: Timeline,
                         produced: Callable[[], int]) -> None:
    """Append a sample every `SAMPLE_S` until cancelled."""
    while True:
        committed, end = await committed_and_end(system, config)
        timeline.samples.append(Sample(time.monotonic() - timeline.start, produced(),
                                       committed, end - committed))
        await asyncio.sleep(SAMPLE_S)


def plot(timeline: Timeline, path: Path, title: str) -> Path:
    """Write a PNG: throughput and lag over time, expansions marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = timeline.samples
    times = [s.t for s in samples]
    rates = [0.0] + [
        (b.committed - a.committed) / (b.t - a.t) if b.t > a.t else 0.0
        for a, b in itertools.pairwise(samples)]
    figure, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(9, 5.5))
    top.plot(times, rates, color="tab:blue")
    top.set_ylabel("committed records/s")
    top.set_title(title)
    bottom.plot(times, [s.lag for s in samples], color="tab:red")
    bottom.set_ylabel("lag (records)")
    bottom.set_xlabel("seconds since start")
    for t, label in timeline.marks:
        for axis in (top, bottom):
            axis.axvline(t, color="grey", linestyle="--", linewidth=0.8)
        top.annotate(label, (t, top.get_ylim()[1]), rotation=90, fontsize=7,
                     va="top", ha="right")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
