"""§1: the per-key sum in each peer, one process each, on one Apache Kafka broker.

One input topic (4 partitions, ``records`` records over ``keys`` keys) is written once;
then in each of ``rounds`` interleaved rounds every peer runs under each guarantee (the
guarantees alternate which goes first, the peers rotate) reading all of it from the start
into an output topic of its own, stopping after the last record. Every output of every
run is read back (``read_committed``) and checked against the ground truth. Per run:

- records/s: records / (closed − first record): the peer's own wall clock from the
  moment it processed its first record to the moment it had committed and closed; and
  the same over the second half of the input alone (from the middle record), past the
  warm-up (a JVM's JIT compiling, caches filling);
- CPU µs/record: the process's CPU time (all threads: JIT compiler and GC included) over
  the same spans, per record;
- peak RSS: the kernel's high-water mark for the process (``wait4``);
- startup: from spawning the process to its first record processed.

The medians of the rounds make the table.
"""

from __future__ import annotations

import asyncio
import statistics
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.peers.kafka_io import OutputReader, create_topics, delete_topics_with, produce
from bench.peers.peers import REPO, Peer, RunSpec
from bench.peers.process import PeerProcess, PeerResult
from bench.peers.verdict import EXACT, Outcome, check_outputs, classify
from bench.peers.workload import Workload

__all__ = ["GUARANTEES", "Measurement", "measure", "prepare_input", "run_rounds",
           "table"]

PARTITIONS = 4
GUARANTEES = ("at-least-once", "exactly-once")


@dataclass(frozen=True)
class Measurement:
    """One peer's run under one guarantee."""

    peer: str
    guarantee: str
    round: int
    result: PeerResult
    outcome: Outcome

    @property
    def ok(self) -> bool:
        return self.outcome.verdict == EXACT

    @property
    def rate(self) -> float:
        return self.result.rate()

    @property
    def rate_late(self) -> float:
        """Records/s over the second half of the input (past warm-up)."""
        return self.result.rate("mid")

    @property
    def cpu_us(self) -> float:
        return self.result.cpu_us_per_record()

    @property
    def cpu_us_late(self) -> float:
        return self.result.cpu_us_per_record("mid")

    @property
    def startup_s(self) -> float:
        return self.result.seconds("first_s")


def _slug(text: str) -> str:
    return "".join(c for c in text.lower() if c.isalnum())[:8]


async def prepare_input(bootstrap: str, workload: Workload) -> str:
    """Create the shared input topic and write the workload into it; its name."""
    topic = f"peers-input-{uuid.uuid4().hex[:8]}"
    await create_topics(bootstrap, {topic: PARTITIONS})
    await produce(bootstrap, topic, PARTITIONS, workload.records)
    return topic


def measure(peer: Peer, bootstrap: str, input_topic: str, truth: dict[str, list[int]],
            count: int, guarantee: str, round_: int, scratch: Path) -> Measurement:
    """Run ``peer`` over the input once and check every output it wrote."""
    name = f"pr-{_slug(peer.name)}-{_slug(guarantee)[:3]}-{round_}-{uuid.uuid4().hex[:6]}"
    output = f"{name}-sums"
    asyncio.run(create_topics(bootstrap, {output: PARTITIONS}))
    folder = scratch / name
    folder.mkdir(parents=True)
    spec = RunSpec(bootstrap=bootstrap, input_topic=input_topic, output_topic=output,
                   name=name, guarantee=guarantee, folder=folder, count=count)
    process = PeerProcess(peer.command(spec), folder / "peer.log", cwd=REPO)
    try:
        result = process.wait(timeout_s=max(900.0, count / 1000))
    finally:
        process.kill()  # a no-op once it exited; the harness stopping never leaves it behind
    try:
        outputs = asyncio.run(_read(bootstrap, output))
        check = check_outputs(truth, outputs)
        outcome = classify(error=result.error, processed=result.records > 0, check=check)
    finally:
        asyncio.run(delete_topics_with(bootstrap, name))
    return Measurement(peer.name, guarantee, round_, result, outcome)


async def _read(bootstrap: str, topic: str) -> dict[str, list[int]]:
    async with OutputReader(bootstrap, topic, PARTITIONS) as reader:
        return await reader.drain()


def run_rounds(peers: Sequence[Peer], bootstrap: str, workload: Workload, rounds: int,
               guarantees: Sequence[str], scratch: Path) -> list[Measurement]:
    """Every peer under every guarantee, ``rounds`` times, interleaved; printed as it goes."""
    truth = workload.truth()
    input_topic = asyncio.run(prepare_input(bootstrap, workload))
    runs: list[Measurement] = []
    try:
        for round_ in range(rounds):
            order = list(guarantees) if round_ % 2 == 0 else list(reversed(guarantees))
            for guarantee in order:
                shift = round_ % len(peers)
                for peer in [*peers[shift:], *peers[:shift]]:
                    run = measure(peer, bootstrap, input_topic, truth, len(workload),
                                  guarantee, round_, scratch)
                    runs.append(run)
                    print(_line(run), flush=True)
    finally:
        asyncio.run(delete_topics_with(bootstrap, input_topic))
    return runs


def _line(run: Measurement) -> str:
    where = f"round {run.round + 1}, {run.peer}, {run.guarantee}:"
    if run.result.report is None or not run.result.records:
        return f"{where} {run.outcome.text()}"
    return (f"{where} {run.rate:,.0f} records/s ({run.rate_late:,.0f} over the second half), "
            f"{run.cpu_us:.1f} CPU µs/record ({run.cpu_us_late:.1f}), peak RSS "
            f"{run.result.peak_rss_mib:,.0f} MiB, first record after "
            f"{run.startup_s:.1f} s; outputs {run.outcome.text()}")


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def table(runs: Sequence[Measurement], peers: Sequence[str], guarantees: Sequence[str]
          ) -> str:
    """The markdown table of medians (exact runs only), then the ratios within rounds."""
    lines = ["| peer | guarantee | records/s | records/s, 2nd half | CPU µs/record | "
             "CPU µs/record, 2nd half | peak RSS MiB | start → first record, s | outputs |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for guarantee in guarantees:
        for peer in peers:
            mine = [r for r in runs if r.peer == peer and r.guarantee == guarantee]
            good = [r for r in mine if r.ok]
            verdict = (f"exact in {len(good)} of {len(mine)} runs" if len(good) == len(mine)
                       else f"{len(mine) - len(good)} of {len(mine)} runs not exact: "
                       + "; ".join(r.outcome.text() for r in mine if not r.ok))
            if not good:
                lines.append(f"| {peer} | {guarantee} | – | – | – | – | – | – | {verdict} |")
                continue
            lines.append(
                f"| {peer} | {guarantee} | {_median([r.rate for r in good]):,.0f} | "
                f"{_median([r.rate_late for r in good]):,.0f} | "
                f"{_median([r.cpu_us for r in good]):.1f} | "
                f"{_median([r.cpu_us_late for r in good]):.1f} | "
                f"{_median([r.result.peak_rss_mib for r in good]):,.0f} | "
                f"{_median([r.startup_s for r in good]):.1f} | {verdict} |")
    return "\n".join(lines)


def paired(runs: Sequence[Measurement], a: tuple[str, str], b: tuple[str, str],
           figure: str = "rate") -> list[float]:
    """Per round, ``figure`` (a `Measurement` property) of (peer, guarantee) ``a`` over
    that of ``b`` (exact runs only)."""
    ratios = []
    for round_ in sorted({r.round for r in runs}):
        mine = {(r.peer, r.guarantee): r for r in runs if r.round == round_ and r.ok}
        if a in mine and b in mine:
            ratios.append(getattr(mine[a], figure) / getattr(mine[b], figure))
    return ratios
