"""What the tests' jobs were given and what they wrote, checked record by record.

Two workloads with their truth: `Workload` (the sum job's seeded amounts per key) and
`Truth` (the count job's per-key sequence numbers). The readers take a started system
(`jobs.harness.open_meta`, `jobs.runs.SampanRun.call`) and return every record in order;
the ``*_problems`` checks name each key whose outputs differ from the truth ([] when all
is right).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from jobs.jobfiles import streams

from framework.config import JobConfig
from framework.drill.verify import read_stream
from framework.systems.base import ProducerRecord, System


@dataclass
class Workload:
    """Seeded records ``{"amount": a, "n": i}`` (i = the key's i-th record) and their truth."""

    keys: int
    seed: int = 7
    stream: str = "events"
    key_prefix: str = "key"
    amounts: dict[str, list[int]] = field(default_factory=dict)

    def records(self, count: int) -> list[ProducerRecord]:
        rng = random.Random(f"{self.seed}-{sum(map(len, self.amounts.values()))}")
        batch = []
        for _ in range(count):
            key = f"{self.key_prefix}-{rng.randrange(self.keys):05d}"
            amount = rng.randint(1, 9)
            seen = self.amounts.setdefault(key, [])
            seen.append(amount)
            value = json.dumps({"amount": amount, "n": len(seen)}).encode()
            batch.append(ProducerRecord(self.stream, key.encode(), value))
        return batch

    @property
    def totals(self) -> dict[str, int]:
        return {key: sum(amounts) for key, amounts in self.amounts.items()}

    @property
    def count(self) -> int:
        return sum(map(len, self.amounts.values()))


@dataclass
class Truth:
    """What was produced: per (stream, key) the sequence numbers 1..n, in order; and the
    ones a remedy made the job skip (`sampan streams discard-held`)."""

    sent: dict[str, int] = field(default_factory=dict)
    discarded: dict[str, set[int]] = field(default_factory=dict)

    def records(self, stream: str, keys: Sequence[str], rounds: int) -> list[ProducerRecord]:
        """``rounds`` records for each key, interleaved, with per-key sequence numbers."""
        batch = []
        for _ in range(rounds):
            for key in keys:
                name = f"{stream}/{key}"
                self.sent[name] = self.sent.get(name, 0) + 1
                value = json.dumps({"seq": self.sent[name]}).encode()
                batch.append(ProducerRecord(stream, key.encode(), value))
        return batch

    def discard(self, records: Sequence[ProducerRecord]) -> None:
        """``records`` (made by `records`) are skipped: no output is expected for them."""
        for record in records:
            name = f"{record.stream}/{(record.key or b'').decode()}"
            self.discarded.setdefault(name, set()).add(json.loads(record.value or b"")["seq"])

    def kept(self) -> dict[str, list[int]]:
        """Per (stream, key) the sequence numbers the job must process, in order."""
        kept = {name: [seq for seq in range(1, n + 1) if seq not in self.discarded.get(name, ())]
                for name, n in sorted(self.sent.items())}
        return {name: seqs for name, seqs in kept.items() if seqs}

    @property
    def total(self) -> int:
        return sum(map(len, self.kept().values()))

    def expected_outputs(self) -> dict[str, list[tuple[int, int]]]:
        """Exactly one output per kept input: counts 1..n with its sequence numbers."""
        return {name: list(enumerate(seqs, 1)) for name, seqs in self.kept().items()}

    def expected_store(self) -> dict[str, int]:
        return {name: len(seqs) for name, seqs in self.kept().items()}


def keys(count: int, prefix: str = "k") -> list[str]:
    """``count`` keys ``k000``, ``k001``… (the count job's)."""
    return [f"{prefix}{n:03d}" for n in range(count)]


async def outputs(system: System, config: JobConfig) -> dict[str, list[dict[str, int]]]:
    """Every output of the sum job per key, in order."""
    found: dict[str, list[dict[str, int]]] = {}
    for rows in (await read_stream(system, streams(config)[1])).values():
        for key, value in rows:
            found.setdefault(key.decode(), []).append(json.loads(value))
    return found


async def output_count(system: System, config: JobConfig) -> int:
    """How many records the sum job's output stream holds."""
    return sum(r.end for r in (await system.offsets(streams(config)[1])).values())


async def changelog_state(system: System, config: JobConfig, store: str = "totals"
                          ) -> dict[str, int]:
    """The store's contents as its changelog tells them (latest record per key)."""
    stream = config.changelog_stream(store).partition(".")[2]
    state: dict[str, int] = {}
    for rows in (await read_stream(system, stream)).values():
        for key, value in rows:
            state[key.decode()] = json.loads(value)
    return state


async def changelog_ends(system: System, config: JobConfig) -> dict[int, int]:
    """End offset of every partition of the ``totals`` store's changelog."""
    stream = config.changelog_stream("totals").partition(".")[2]
    return {p: r.end for p, r in (await system.offsets(stream)).items()}


async def checkpointed(system: System, config: JobConfig) -> int:
    """Input records covered by the tasks' committed checkpoints."""
    checkpoints = await system.read_checkpoints(config.name)
    return sum(sum(c.inputs.values()) for c in checkpoints.values())


def exact_problems(found: dict[str, list[dict[str, int]]], work: Workload) -> list[str]:
    """Every key's outputs must be its running sums, one per input record, in order."""
    problems = []
    for key, amounts in sorted(work.amounts.items()):
        want, running = [], 0
        for n, amount in enumerate(amounts, 1):
            running += amount
            want.append({"sum": running, "n": n})
        got = found.get(key, [])
        if got != want:
            first = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
                         min(len(got), len(want)))
            problems.append(f"{key}: {len(got)} outputs, expected {len(want)}; first "
                            f"difference at output {first}")
    problems += [f"{key}: outputs for a key never produced" for key in found
                 if key not in work.amounts]
    return problems


def replay_problems(found: dict[str, list[dict[str, int]]], work: Workload) -> list[str]:
    """At-least-once after a crash: outputs may repeat, but only as a replay of outputs
    already emitted (same record number, same sum); every record's output is there and
    the first time each appears, in order with its running sum."""
    problems = []
    for key, amounts in sorted(work.amounts.items()):
        sums = [sum(amounts[:n]) for n in range(1, len(amounts) + 1)]
        first: dict[int, int] = {}
        for output in found.get(key, []):
            n, total = output["n"], output["sum"]
            if n in first:
                if first[n] != total:
                    problems.append(f"{key}: replayed output {n} has sum {total}, first "
                                    f"{first[n]}")
            elif n != len(first) + 1 or total != sums[n - 1]:
                problems.append(f"{key}: output {output} where record {len(first) + 1} "
                                f"(sum {sums[len(first)] if len(first) < len(sums) else '-'}) "
                                "was due")
                break
            else:
                first[n] = total
        if len(first) != len(amounts):
            problems.append(f"{key}: {len(first)} of {len(amounts)} records have an output")
    return problems


async def exact_outputs(system: System, config: JobConfig, work: Workload) -> list[str]:
    """Every output record checked: one per input, in order per key (`exact_problems`),
    and the store's changelog holding the true totals; [] when all is right."""
    problems = exact_problems(await outputs(system, config), work)
    state = await changelog_state(system, config)
    if state != work.totals:
        wrong = sorted(k for k in {*state, *work.totals} if state.get(k) != work.totals.get(k))
        problems.append(f"changelog totals differ for {len(wrong)} keys, e.g. {wrong[:3]}")
    return problems
