"""Per-key order through an expansion when a producer learns of the new count late: real
`sampan run`, real workers, the real local log on disk.

A producer re-reads partition counts only now and then (Kafka's `metadata.max.age.ms`), so
after the job detected 4 → 8 it may still write a key to the key's old partition, and only
then to its new one. Those records lie past the expansion barrier; the task must still
process each key's records in the order they were produced — every output is checked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from jobs.outputs import keys
from jobs.runs import CountJob

from framework.partitioner import partition_for_key
from framework.systems.base import ProducerRecord


def placed(records: list[ProducerRecord], count: int) -> list[ProducerRecord]:
    """``records`` written where a producer that believes the stream has ``count``
    partitions puts them."""
    return [dataclasses.replace(r, partition=partition_for_key(r.key or b"", count))
            for r in records]


async def barriers_passed(job: CountJob, tasks: int) -> bool:
    """Whether ``tasks`` tasks logged that they passed their expansion barrier."""
    text = "".join(p.read_text(errors="replace") for p in job.logs.glob("worker-*.log"))
    return text.count("passed its expansion barrier") >= tasks


async def past_the_barrier(job: CountJob) -> tuple[CountJob, list[str]]:
    """``job`` over 4 partitions of words, started, grown to 8, every task past its
    barrier; and its 12 keys."""
    await job.create("words", 4)
    words = keys(12)
    await job.send(placed(job.truth.records("words", words, 2), 4))
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    await job.expand("words", 8)
    await job.wait_epoch(2)
    await job.wait(lambda: barriers_passed(job, 4), "every task past its barrier", 60)
    return job, words


async def test_a_stale_producers_records_in_the_old_partition_come_before_the_new_ones(
        make_job: Callable[..., CountJob]) -> None:
    """After 4 → 8 was taken, a producer still writes 6,000 records to the keys' old
    partitions, then switches to the new ones: every key's outputs are its inputs in the
    order produced (the old partition's backlog first), one each, and the store is exact."""
    job, words = await past_the_barrier(make_job("order", {"words": 4}, monitor_ms=300))
    moved = [w for w in words if partition_for_key(w.encode(), 4) != partition_for_key(
        w.encode(), 8)]
    assert moved  # some keys have a new partition: their order is what is tested
    await job.send(placed(job.truth.records("words", words, 500), 4))  # the stale producer
    await job.send(placed(job.truth.records("words", words, 10), 8))  # …once it switched
    await job.wait_outputs(timeout=120)
    assert await job.stop() == 0
    await job.assert_exact()


async def test_a_task_started_after_its_barrier_was_passed_still_merges_in_the_window(
        make_job: Callable[..., CountJob]) -> None:
    """The job passes its 4 → 8 barrier and stops; a stale producer then writes 6,000
    records to the keys' old partitions, then some to the new ones; the job restarts on a
    new model (one worker instead of two) whose tasks' checkpoints passed the barrier long
    ago, but within ``expansion_merge_ms`` of it: the new model names the stage
    (`TaskModel.merging`), the workers merge in record time as the ones that passed it
    did, and every key's outputs are its inputs in the order produced (a failover within
    the window is the same case)."""
    job, words = await past_the_barrier(
        make_job("order-restart", {"words": 4}, monitor_ms=300))
    assert await job.stop() == 0
    await job.send(placed(job.truth.records("words", words, 500), 4))  # the stale producer
    await job.send(placed(job.truth.records("words", words, 10), 8))  # …once it switched
    job.write("order-restart", {"words": 8}, workers=1)
    job.start()
    state = await job.wait_epoch(3)
    assert state.model is not None
    gained = {t.name: t for t in state.model.tasks.values() if len(t.ssps) == 2}
    assert len(gained) == 4 and all(not t.stages and [s.held for s in t.merging] == [
        t.ssps - {s for s in t.ssps if s.partition < 4}] for t in gained.values())
    await job.wait_outputs(timeout=120)
    assert await job.stop() == 0
    await job.assert_exact()
