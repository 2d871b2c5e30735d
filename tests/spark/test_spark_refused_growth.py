"""A refused partition change end to end: 2 → 3 partitions (a count that is no multiple of
the 2 tasks), forced. The job holds the stream where it grew — no key ends wrong — and the
remedy, `sampan rekey --tasks 3`, makes it go on with every count exact; also when the
stream grew on to 6 after records were written at 3 (the re-keyed job reads them at 3,
then expands to 6 with its barrier)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from sparkjobs import Words, final_state, on_system, run_until_caught_up, wordcount_job

from framework.config import JobConfig, load_config
from framework.coordinator.process import Coordinator
from framework.metadata import read_state
from framework.spark.rekey import rekey_job
from framework.systems import open_system

WORDS = [f"word-{n:03d}" for n in range(200)]


def run_until_refused_and_drained(config: JobConfig, log_dir: Path,
                                  grown_at: dict[int, int], counts: int = 3) -> None:
    """Run the job until it held the stream at ``counts`` partitions and read words exactly
    up to ``grown_at``."""

    async def main() -> None:
        coordinator = Coordinator(config, log_dir=log_dir)
        task = asyncio.create_task(coordinator.run())
        meta = open_system(config.system("local"))
        try:
            deadline = asyncio.get_running_loop().time() + 120
            while True:
                assert not task.done(), task.result()
                assert asyncio.get_running_loop().time() < deadline, "never drained"
                refusal = (await read_state(meta, config)).status.refusal
                read = {ssp.partition: position
                        for cp in (await meta.read_checkpoints(config.name)).values()
                        for ssp, position in cp.inputs.items()}
                assert all(read.get(p, 0) <= end for p, end in grown_at.items()), read
                if refusal and refusal.counts == {"local.words": counts} and read == grown_at:
                    break
                await asyncio.sleep(0.2)
        finally:
            coordinator.stop.set()
            await asyncio.gather(task, return_exceptions=True)
            await meta.close()

    asyncio.run(main())


def final_counts(job: Path) -> tuple[dict[str, int], dict[str, list[tuple[int, int]]]]:
    """The store and, per word, its outputs as (count, seq)."""
    _, store, emitted = final_state(job)
    return store, {w: [(u["count"], u["seq"]) for u in ups] for w, ups in emitted.items()}


def test_a_forced_2_to_3_growth_is_held_then_rekeyed_to_3_tasks_exactly(
        tmp_path: Path, spark: Any) -> None:
    job = wordcount_job(tmp_path / "wordcount")
    config = load_config(job)
    words = Words()
    words.produce(config, WORDS, 3)
    run_until_caught_up(config, tmp_path / "logs-1")

    async def grow(system: Any) -> dict[int, int]:
        ends = {p: r.end for p, r in (await system.offsets("words")).items()}
        await system.expand_stream("words", 3)  # what `streams expand --force` does
        return ends

    grown_at = on_system(config, grow)
    words.produce(config, WORDS, 2)  # placed for 3 partitions
    run_until_refused_and_drained(config, tmp_path / "logs-2", grown_at)
    store, _ = final_counts(job)
    assert store == {word: 3 for word in WORDS}  # nothing written under 3 read under 2

    result = rekey_job(job, 3, spark=spark)
    assert (result.tasks_before, result.tasks_after) == (2, 3)
    words.produce(config, WORDS, 1)
    run_until_caught_up(config, tmp_path / "logs-3")
    store, emitted = final_counts(job)
    assert store == {word: 6 for word in WORDS}
    assert emitted == {word: [(n, n) for n in range(1, 7)] for word in WORDS}


def test_writes_at_3_then_6_are_held_then_rekeyed_to_3_tasks_exactly(
        tmp_path: Path, spark: Any) -> None:
    job = wordcount_job(tmp_path / "wordcount")
    config = load_config(job)
    words = Words()
    words.produce(config, WORDS, 3)
    run_until_caught_up(config, tmp_path / "logs-1")

    async def grow(system: Any) -> dict[int, int]:
        ends = {p: r.end for p, r in (await system.offsets("words")).items()}
        await system.expand_stream("words", 3)
        return ends

    grown_at = on_system(config, grow)
    words.produce(config, WORDS, 2)  # placed for 3 partitions
    on_system(config, lambda system: system.expand_stream("words", 6))
    words.produce(config, WORDS, 2)  # placed for 6 partitions
    run_until_refused_and_drained(config, tmp_path / "logs-2", grown_at, counts=6)
    store, _ = final_counts(job)
    assert store == {word: 3 for word in WORDS}

    result = rekey_job(job, 3, spark=spark)
    assert (result.tasks_before, result.tasks_after) == (2, 3)
    words.produce(config, WORDS, 1)
    run_until_caught_up(config, tmp_path / "logs-3")
    store, emitted = final_counts(job)
    assert store == {word: 8 for word in WORDS}
    assert emitted == {word: [(n, n) for n in range(1, 9)] for word in WORDS}
