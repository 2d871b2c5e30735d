"""§2: each peer's per-key sum through a live 2 → 4 expansion of its input.

Per peer and guarantee, on the bench's broker: an input topic of 2 partitions and an
output topic of 4 (fixed). The peer starts (sampan as ``sampan run``: a coordinator and
one worker process, the product's path for live expansion; the others as in §1, running
until stopped). The harness writes `Plan.warmup` records, waits for the peer's first
output, writes `Plan.before` more at `Plan.rate` records/s, grows the input to 4
partitions with CreatePartitions and at once goes on writing `Plan.after` records at the
same rate, now placed over 4 partitions (half the keys move to a new partition). It then
waits until every key's last output is its true total, or until no output came for
`Plan.stall_s` once all input was written, or until the peer exits by itself, and stops
the peer (SIGTERM). A peer that exited by itself, or stalled short of the truth, is started
once more on the same state and followed the same way, as a supervisor or an operator
would. Every output of the run is then read
and checked against the ground truth (`bench.peers.verdict`).
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.peers.kafka_io import (
    OutputReader,
    create_topics,
    delete_topics_with,
    expand_topic,
    produce,
)
from bench.peers.peers import REPO, Peer, RunSpec, SampanPeer
from bench.peers.process import PeerProcess, PeerResult
from bench.peers.verdict import Outcome, check_outputs, classify
from bench.peers.workload import Workload, make_workload

__all__ = ["ExpansionRun", "Plan", "run", "run_one", "table"]

INITIAL = 2
EXPANDED = 4
OUTPUT_PARTITIONS = 4
START_TIMEOUT_S = 180.0
GUARANTEES = ("at-least-once", "exactly-once")


@dataclass(frozen=True)
class Plan:
    """How much input, over how many keys, how fast; defaults: the bench's."""

    keys: int = 500
    warmup: int = 2_000
    """Written first, at once; the expansion waits for the peer's first output."""
    before: int = 10_000
    """Written at `rate` before the expansion."""
    after: int = 12_000
    """Written at `rate` right after it, over the expanded partitions."""
    rate: float = 1_000.0
    stall_s: float = 45.0
    """No new output this long (once all input was written): the peer is done."""

    @property
    def records(self) -> int:
        return self.warmup + self.before + self.after

    def workload(self) -> Workload:
        return make_workload(self.records, self.keys)


@dataclass(frozen=True)
class ExpansionRun:
    """What one peer did through the expansion (and, if it stopped, once restarted)."""

    peer: str
    guarantee: str
    outcome: Outcome
    restarted: Outcome | None
    """What the restarted peer did, if the first process stopped by itself or stalled."""
    final: Outcome
    """Every output of the run (both processes) against the ground truth."""
    caught_up_s: float | None
    """Seconds from the expansion until every key's last output was its true total."""


def _name(peer: Peer, guarantee: str) -> str:
    slug = "".join(c for c in peer.name.lower() if c.isalnum())[:8]
    return f"px-{slug}-{guarantee[:3]}-{uuid.uuid4().hex[:6]}"


def _caught_up(outputs: dict[str, list[int]], truth: dict[str, list[int]]) -> bool:
    return all(outputs.get(key, [None])[-1] == want[-1] for key, want in truth.items())


async def _follow(process: PeerProcess, reader: OutputReader, truth: dict[str, list[int]],
                  stall_s: float) -> bool:
    """Until the outputs caught up (True), the peer exited, or no output for ``stall_s``."""
    seen, last_progress = reader.received, time.monotonic()
    while process.poll() is None:
        if _caught_up(reader.outputs, truth):
            return True
        if reader.received != seen:
            seen, last_progress = reader.received, time.monotonic()
        elif time.monotonic() - last_progress > stall_s:
            return False
        await asyncio.sleep(0.2)
    return _caught_up(reader.outputs, truth)


def _judge(process: PeerProcess, exited: bool, sent_before: int, received: int
           ) -> tuple[PeerResult, str | None, bool]:
    """Stop the peer; (its result, its error if it failed, whether it processed any)."""
    result = process.stop()
    error = result.error if exited or (result.report or {}).get("error") else None
    if exited and error is None:
        error = f"exited by itself (code {result.exit_code}) before its input was done"
    return result, error, result.records > 0 or received > sent_before


async def _drive(command: list[str], folder: Path, bootstrap: str, input_topic: str,
                 output_topic: str, plan: Plan
                 ) -> tuple[Outcome, Outcome | None, dict[str, list[int]], float | None]:
    """Write the input around the expansion while following the outputs; restart the peer
    once if it stopped by itself. Returns (its outcome, the restart's outcome or None,
    every output, seconds from the expansion to caught up or None)."""
    workload = plan.workload()
    truth = workload.truth()
    warmup = workload.slice(0, plan.warmup)
    before = workload.slice(plan.warmup, plan.warmup + plan.before)
    after = workload.slice(plan.warmup + plan.before, plan.records)
    expanded: float | None = None
    caught_up: float | None = None
    async with OutputReader(bootstrap, output_topic, OUTPUT_PARTITIONS) as reader:
        reader.follow()
        process = PeerProcess(command, folder / "peer.log", cwd=REPO)
        try:
            await produce(bootstrap, input_topic, INITIAL, warmup.records)
            deadline = time.monotonic() + START_TIMEOUT_S
            while not reader.received and process.poll() is None:
                if time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.1)
            if reader.received:
                await produce(bootstrap, input_topic, INITIAL, before.records,
                              per_second=plan.rate)
                await expand_topic(bootstrap, input_topic, EXPANDED)
                expanded = time.monotonic()
                await produce(bootstrap, input_topic, EXPANDED, after.records,
                              per_second=plan.rate)
                if await _follow(process, reader, truth, plan.stall_s):
                    caught_up = time.monotonic() - expanded
            exited = process.poll() is not None
            await asyncio.sleep(2.0)  # a commit in flight lands before the stop
            _, error, processed = _judge(process, exited, 0, reader.received)
        finally:
            process.kill()
        first = _outcome(error, processed, reader, truth)
        restarted = None
        if expanded is not None and (exited or caught_up is None):
            # As a supervisor (it stopped) or an operator (it stalled) would: start it again.
            sent = reader.received
            again = PeerProcess(command, folder / "peer-restarted.log", cwd=REPO)
            try:
                if await _follow(again, reader, truth, plan.stall_s) and caught_up is None:
                    caught_up = time.monotonic() - expanded
                exited_again = again.poll() is not None
                await asyncio.sleep(2.0)
                _, error, processed = _judge(again, exited_again, sent, reader.received)
            finally:
                again.kill()
            restarted = _outcome(error, processed, reader, truth)
        return first, restarted, await reader.drain(), caught_up


def _outcome(error: str | None, processed: bool, reader: OutputReader,
             truth: dict[str, list[int]]) -> Outcome:
    return classify(error=error, processed=processed,
                    check=check_outputs(truth, reader.outputs))


def run_one(peer: Peer, bootstrap: str, guarantee: str, scratch: Path,
            plan: Plan | None = None) -> ExpansionRun:
    """One peer through one expansion under ``guarantee``."""
    name = _name(peer, guarantee)
    input_topic, output_topic = f"{name}-events", f"{name}-sums"
    asyncio.run(create_topics(bootstrap, {input_topic: INITIAL,
                                          output_topic: OUTPUT_PARTITIONS}))
    folder = scratch / name
    folder.mkdir(parents=True)
    spec = RunSpec(bootstrap=bootstrap, input_topic=input_topic, output_topic=output_topic,
                   name=name, guarantee=guarantee, folder=folder)
    command = (peer.run_command(spec) if isinstance(peer, SampanPeer)
               else peer.command(spec))
    plan = plan or Plan()
    try:
        first, restarted, outputs, caught_up = asyncio.run(
            _drive(command, folder, bootstrap, input_topic, output_topic, plan))
    finally:
        asyncio.run(delete_topics_with(bootstrap, name))
    truth = plan.workload().truth()
    check = check_outputs(truth, outputs)
    final = Outcome(check.worst()[0], check.summary())
    return ExpansionRun(peer.name, guarantee, first, restarted, final, caught_up)


async def _read_all(bootstrap: str, topic: str) -> dict[str, list[int]]:
    async with OutputReader(bootstrap, topic, OUTPUT_PARTITIONS) as reader:
        return await reader.drain()


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def table(runs: Sequence[ExpansionRun], samza: str | None = None) -> str:
    """The markdown table of §2."""
    lines = ["| peer | guarantee | through a live 2 → 4 expansion | restarted once | "
             "all outputs, checked | caught up after the expansion |",
             "|---|---|---|---|---|---:|"]
    for one in runs:
        after = f"{one.caught_up_s:.1f} s" if one.caught_up_s is not None else "never"
        restarted = one.restarted.text() if one.restarted is not None else "–"
        lines.append(f"| {one.peer} | {one.guarantee} | {_cell(one.outcome.text())} | "
                     f"{_cell(restarted)} | {_cell(one.final.text())} | {after} |")
    if samza:
        lines.append(f"| Samza | – | not run: {_cell(samza)} | – | – | – |")
    return "\n".join(lines)


def run(bootstrap: str, peers: Sequence[Peer], args: argparse.Namespace,
        scratch: Path) -> str:
    """Every peer under every guarantee through one expansion each; the table."""
    guarantees = tuple(args.guarantee or GUARANTEES)
    plan = Plan()
    print(f"§2 live expansion {INITIAL} → {EXPANDED}: {plan.records:,} records over "
          f"{plan.keys} keys at {plan.rate:,.0f} records/s, the expansion after "
          f"{plan.warmup + plan.before:,}", flush=True)
    runs = []
    for guarantee in guarantees:
        for peer in peers:
            if guarantee not in getattr(peer, "guarantees", GUARANTEES):
                continue
            one = run_one(peer, bootstrap, guarantee, scratch, plan)
            runs.append(one)
            again = f"; restarted: {one.restarted.text()}" if one.restarted else ""
            print(f"{one.peer}, {one.guarantee}: {one.outcome.text()}{again}", flush=True)
    return table(runs)
