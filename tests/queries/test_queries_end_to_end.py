"""Queries while the job runs, on the local log: real `sampan run`, real workers, the
input growing 2 → 4 → 8 and a worker SIGKILLed, while a querier asks for random keys.

Every answer is checked exactly: it carries the task and the changelog position its
committed state reflects, so the value must be the key's last changelog record before
that position (none: not found) — a value the key had at a commit, which the job's
outputs also hold — and per key the answers never go backwards. The fraction of
queries answered, the longest stretch a key was unavailable and the latencies are
logged, never asserted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import signal
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from coordinator.coordjobs import Job, keys

from framework.config import load_config
from framework.queries.client import Answer, Client
from framework.queries.errors import EndpointUnreachableError, TaskUnavailableError
from framework.systems.base import System
from framework.systems.reading import read_range
from groupers import SystemStreamPartition

pytestmark = pytest.mark.slow  # real `sampan run` and workers (tests/conftest.py's SLOW)

log = logging.getLogger(__name__)

KEYS = keys(40)
QUERY_KEYS = '''\
def record_key(key):
    """The store's key "words/<key>" is the input's record key "<key>"."""
    return key.split("/", 1)[1]
'''


@pytest.fixture
def job(tmp_path: Path) -> Iterator[Job]:
    """The coordinator tests' counting job with [queries] on and its store keyed by the
    input (its keys are "<stream>/<key>": `key_to_input` strips the stream); the
    changelog is never compacted, so every committed value stays readable."""
    made = Job(tmp_path / "queried", "queried", {"words": 2}, monitor_ms=300)
    (made.folder / "query_keys.py").write_text(QUERY_KEYS)
    text = made.path.read_text().replace(
        "[coordinator]\n", "[coordinator]\ncompaction_interval_ms = 0\n")
    made.path.write_text(text + 'keyed_by = "local.words"\n'
                         'key_to_input = "query_keys:record_key"\n\n'
                         "[queries]\nenabled = true\n")
    made.config = load_config(made.path)
    try:
        yield made
    finally:
        made.kill()


@dataclass
class Querier:
    """Asks for random keys until stopped; keeps every answer and what it waited."""

    client: Client
    answers: list[tuple[str, Answer]] = field(default_factory=list)
    asked: int = 0
    latencies: list[float] = field(default_factory=list)
    unavailable_since: dict[str, float] = field(default_factory=dict)
    longest_unavailable: float = 0.0

    async def run(self, stop: asyncio.Event) -> None:
        rng = random.Random(49)
        while not stop.is_set():
            key = rng.choice(KEYS)
            began = time.monotonic()
            self.asked += 1
            try:
                answer = await self.client.get("counts", f"words/{key}")
            except (TaskUnavailableError, EndpointUnreachableError):
                self.unavailable_since.setdefault(key, began)
                await asyncio.sleep(0.02)
                continue
            now = time.monotonic()
            self.latencies.append(now - began)
            since = self.unavailable_since.pop(key, None)
            if since is not None:
                self.longest_unavailable = max(self.longest_unavailable, now - since)
            self.answers.append((key, answer))

    def figures(self) -> str:
        ordered = sorted(self.latencies)
        p99 = ordered[int(len(ordered) * 0.99)] if ordered else float("nan")
        return (f"{len(self.answers)} of {self.asked} queries answered "
                f"({len(self.answers) / max(self.asked, 1):.1%}), longest unavailable "
                f"{self.longest_unavailable:.2f} s, p50 "
                f"{statistics.median(ordered) * 1000 if ordered else float('nan'):.1f} ms, "
                f"p99 {p99 * 1000:.1f} ms, {self.client.retried} retried, "
                f"{self.client.stale} stale answers refused")


async def produce_until(job: Job, stop: asyncio.Event) -> None:
    while not stop.is_set():
        await job.produce("words", KEYS, 1)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.05)


async def until(job: Job, condition: Callable[[], bool], what: str) -> None:
    async def holds() -> bool:
        return condition()
    await job.wait(holds, what, timeout=120)


async def changelog(job: Job) -> dict[int, list[tuple[int, str, int]]]:
    """Each changelog partition's records: (offset, store key, value), in offset order."""
    stream = job.config.changelog_ref("counts").stream

    async def read(system: System) -> dict[int, list[tuple[int, str, int]]]:
        found: dict[int, list[tuple[int, str, int]]] = {}
        for partition, offsets in sorted((await system.offsets(stream)).items()):
            rows = found.setdefault(partition, [])
            ssp = SystemStreamPartition(system.name, stream, partition)
            async for batch in read_range(system, ssp, offsets.oldest, offsets.end):
                rows += [(r.offset, (r.key or b"").decode(), json.loads(r.value))
                         for r in batch if r.value is not None]
        return found
    return await job.call(read)  # type: ignore[no-any-return]


async def test_queries_stay_exact_through_expansions_and_a_killed_worker(job: Job) -> None:
    await job.create("words", 2)
    await job.produce("words", KEYS, 5)
    job.start()
    await job.wait_epoch(1)
    stop_queries, stop_input = asyncio.Event(), asyncio.Event()
    client = Client(job.config, retry_for=0)
    querier = Querier(client)
    querying = asyncio.create_task(querier.run(stop_queries))
    producing = asyncio.create_task(produce_until(job, stop_input))
    try:
        await until(job, lambda: len(querier.answers) >= 100, "100 answers at 2 partitions")
        for epoch, count in ((2, 4), (3, 8)):
            await job.expand("words", count)
            await job.wait_epoch(epoch)
            seen = len(querier.answers)
            await until(job, lambda seen=seen: len(querier.answers) >= seen + 100,
                        f"100 answers at {count} partitions")
        state = await job.state()
        killed = state.workers[1].pid
        os.kill(killed, signal.SIGKILL)

        async def restarted() -> bool:
            report = (await job.state()).workers.get(1)
            return (report is not None and report.pid != killed and report.resumed_ms is not None
                    and report.stopped_ms is None)
        await job.wait(restarted, "worker 1 restarted after SIGKILL", timeout=120)
        seen = len(querier.answers)
        await until(job, lambda: len(querier.answers) >= seen + 200,
                    "200 answers after the restart")
    finally:
        stop_input.set()
        await producing
    await job.wait_outputs(timeout=180)
    stop_queries.set()
    await querying
    try:
        final = {key: (await client.get("counts", f"words/{key}")) for key in KEYS}
    finally:
        await client.close()
    log.warning("queries through 2→4→8 and a SIGKILLed worker: %s", querier.figures())
    assert await job.stop() == 0
    await job.assert_exact()
    expected = job.truth.expected_store()
    assert {k: a.value for k, a in final.items()} == {k: expected[f"words/{k}"] for k in KEYS}

    state = await job.state()
    assert state.model is not None
    changelog_partition = {t.name: t.changelog_partition for t in state.model.tasks.values()}
    records = await changelog(job)
    outputs = await job.outputs()
    last: dict[str, int] = {}
    for key, answer in querier.answers:
        name = f"words/{key}"
        assert answer.position is not None
        history = [value for offset, k, value in records[changelog_partition[answer.task]]
                   if k == name and offset < answer.position]
        value = answer.value if answer.found else 0
        assert value == (history[-1] if history else 0), (key, answer)
        assert value == 0 or value in {count for count, _ in outputs[name]}
        assert value >= last.get(key, 0), f"{key} went back from {last[key]} to {value}"
        last[key] = value
    assert len(querier.answers) >= 600
