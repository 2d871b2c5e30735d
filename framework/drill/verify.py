"""Check a word-count run against its ground truth: store contents, outputs, per-key order."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from framework.config import JobConfig
from framework.systems.base import System
from framework.systems.reading import read_range
from groupers import SystemStreamPartition


@dataclass
class Verdict:
    """What matched and what did not; ``exact`` only when nothing is wrong."""

    keys: int
    store_wrong: dict[str, tuple[int, int | None]] = field(default_factory=dict)
    output_wrong: dict[str, tuple[int, int | None]] = field(default_factory=dict)
    out_of_order: dict[str, str] = field(default_factory=dict)

    @property
    def wrong_keys(self) -> set[str]:
        return set(self.store_wrong) | set(self.output_wrong) | set(self.out_of_order)

    @property
    def exact(self) -> bool:
        return not self.wrong_keys

    def describe(self, limit: int = 5) -> list[str]:
        lines = []
        for title, wrong in (("store", self.store_wrong), ("last output", self.output_wrong)):
            for key, (want, got) in sorted(wrong.items())[:limit]:
                lines.append(f"  {title} {key}: expected {want}, got {got}")
        for key, why in sorted(self.out_of_order.items())[:limit]:
            lines.append(f"  order {key}: {why}")
        return lines


async def read_stream(system: System, stream: str) -> dict[int, list[tuple[bytes, bytes]]]:
    """Every (key, value) of every partition of ``stream``, in offset order."""
    records: dict[int, list[tuple[bytes, bytes]]] = {}
    for partition, offsets in sorted((await system.offsets(stream)).items()):
        rows: list[tuple[bytes, bytes]] = []
        ssp = SystemStreamPartition(system.name, stream, partition)
        async for batch in read_range(system, ssp, offsets.oldest, offsets.end):
            rows.extend((r.key or b"", r.value) for r in batch if r.value is not None)
        records[partition] = rows
    return records


async def verify_wordcount(
    config: JobConfig, system: System, truth: Mapping[str, int]
) -> Verdict:
    """Compare the store's changelog and the output stream with ``truth`` exactly."""
    verdict = Verdict(keys=len(truth))
    changelog = config.changelog_stream("counts").partition(".")[2]
    store: dict[str, int] = {}
    for rows in (await read_stream(system, changelog)).values():
        for key, value in rows:
            store[key.decode()] = json.loads(value)
    outputs: dict[str, list[dict[str, int]]] = {}
    for rows in (await read_stream(system, "word-counts")).values():
        for key, value in rows:
            outputs.setdefault(key.decode(), []).append(json.loads(value))
    for word, want in truth.items():
        if store.get(word) != want:
            verdict.store_wrong[word] = (want, store.get(word))
        emitted = outputs.get(word, [])
        last = emitted[-1]["count"] if emitted else None
        if last != want:
            verdict.output_wrong[word] = (want, last)
        counts = [o["count"] for o in emitted]
        seqs = [o["seq"] for o in emitted]
        if counts != list(range(1, len(counts) + 1)) or seqs != counts:
            first_bad = next((i for i, (c, s) in enumerate(zip(counts, seqs, strict=True))
                              if c != i + 1 or s != i + 1), len(counts))
            verdict.out_of_order[word] = (
                f"update {first_bad + 1} was count={counts[first_bad] if first_bad < len(counts) else None} "
                f"seq={seqs[first_bad] if first_bad < len(seqs) else None}")
    return verdict
