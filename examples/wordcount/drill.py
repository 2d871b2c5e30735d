"""The word-count drill: skewed words with per-word sequence numbers, checked exactly."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from framework.config import JobConfig
from framework.drill.scenario import Verdict
from framework.drill.verify import read_stream
from framework.systems.base import ProducerRecord, System


class WordCountScenario:
    """``keys`` words, Zipf-like skew, seeded; each record carries the word's sequence number.

    The sequence number lets the checker see both the final count and whether any word's
    updates were repeated, lost or reordered.
    """

    expand = "words"
    initial_partitions = 2
    steps = (4, 8)

    def __init__(self, keys: int, seed: int) -> None:
        self._random = random.Random(seed)
        self._words = [f"word-{n:05d}" for n in range(keys)]
        self._weights = [1.0 / (n + 1) ** 0.6 for n in range(keys)]
        self.truth: Counter[str] = Counter()

    def streams(self, initial_partitions: int) -> Mapping[str, int]:
        return {"words": initial_partitions, "word-counts": 2}

    def records(self, count: int) -> Sequence[ProducerRecord]:
        batch = []
        for word in self._random.choices(self._words, self._weights, k=count):
            self.truth[word] += 1
            value = json.dumps({"seq": self.truth[word]}).encode()
            batch.append(ProducerRecord("words", word.encode(), value))
        return batch

    async def verify(self, config: JobConfig, system: System) -> Verdict:
        return await check(config, system, self.truth)


async def check(config: JobConfig, system: System, truth: Mapping[str, int]) -> Verdict:
    """Store contents (its changelog), last output and per-word order against ``truth``."""
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
        problems = []
        if store.get(word) != want:
            problems.append(f"store has {store.get(word)}, expected {want}")
        emitted = outputs.get(word, [])
        last = emitted[-1]["count"] if emitted else None
        if last != want:
            problems.append(f"last output {last}, expected {want}")
        problems.extend(_order_problem(emitted))
        if problems:
            verdict.wrong[word] = "; ".join(problems)
    return verdict


def _order_problem(emitted: list[dict[str, int]]) -> list[str]:
    """Update i of a word must be count=i caused by seq=i: nothing repeated or reordered."""
    for index, update in enumerate(emitted, start=1):
        if update["count"] != index or update["seq"] != index:
            return [f"update {index} was count={update['count']} seq={update['seq']}"]
    return []


def scenario(options: Any) -> WordCountScenario:
    return WordCountScenario(keys=options.keys, seed=options.seed)
