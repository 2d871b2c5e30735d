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
import logging
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from jobs.outputs import keys
from jobs.runs import CountJob
from queryjobs import Querier, changelog_records, wrong_answers

from framework.config import load_config
from framework.queries.client import Client

pytestmark = pytest.mark.slow  # real `sampan run` and workers (tests/conftest.py's SLOW)

log = logging.getLogger(__name__)

KEYS = keys(40)
QUERY_KEYS = '''\
def record_key(key):
    """The store's key "words/<key>" is the input's record key "<key>"."""
    return key.split("/", 1)[1]
'''


@pytest.fixture
def job(tmp_path: Path) -> Iterator[CountJob]:
    """The coordinator tests' counting job with [queries] on and its store keyed by the
    input (its keys are "<stream>/<key>": `key_to_input` strips the stream); the
    changelog is never compacted, so every committed value stays readable."""
    made = CountJob(tmp_path / "queried", "queried", {"words": 2}, monitor_ms=300)
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


async def produce_until(job: CountJob, stop: asyncio.Event) -> None:
    while not stop.is_set():
        await job.produce("words", KEYS, 1)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.05)


async def until(job: CountJob, condition: Callable[[], bool], what: str) -> None:
    async def holds() -> bool:
        return condition()
    await job.wait(holds, what, timeout=120)


async def test_queries_stay_exact_through_expansions_and_a_killed_worker(job: CountJob) -> None:
    await job.create("words", 2)
    await job.produce("words", KEYS, 5)
    job.start()
    await job.wait_epoch(1)
    stop_queries, stop_input = asyncio.Event(), asyncio.Event()
    client = Client(job.config, retry_for=0)
    querier = Querier(client, "counts", KEYS, lambda key: f"words/{key}")
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
    expected = {key: job.truth.expected_store()[f"words/{key}"] for key in KEYS}
    final: dict[str, int] = {}

    async def final_counts() -> bool:  # the last commits' values, once applied
        for key in KEYS:
            final[key] = (await client.get("counts", f"words/{key}")).value
        return final == expected
    try:
        await job.wait(final_counts, "every key's final count answered", timeout=60)
    finally:
        await client.close()
    log.warning("queries through 2→4→8 and a SIGKILLed worker: %s", querier.figures())
    assert await job.stop() == 0
    await job.assert_exact()

    state = await job.state()
    assert state.model is not None
    records = await job.call(lambda system: changelog_records(system, job.config, "counts"))
    counts = {name.partition("/")[2]: {c for c, _ in found}
              for name, found in (await job.outputs()).items()}
    assert wrong_answers(querier.answers, state.model, records, counts) == []
    assert len(querier.answers) >= 600
