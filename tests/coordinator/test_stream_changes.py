"""Inputs that change under a running job: one joined stream expands, a stream is added,
and changes that must be refused (non-multiple, decrease) while the job keeps running."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from jobs.outputs import keys
from jobs.runs import CountJob, placement

from framework.partitioner import partition_for_key
from framework.systems.base import ProducerRecord
from framework.systems.local.schema import database_file


def words(stream: str, partitions: range) -> list[list[object]]:
    return [["local", stream, p] for p in partitions]


async def test_only_one_of_two_joined_streams_expands(make_job: Callable[..., CountJob]) -> None:
    """a (3) and b (3→6): task i holds a_i, b_i, b_{i+3}; counts per (stream, key) exact."""
    job = make_job("joined", {"a": 3, "b": 3}, workers=2)
    await job.create("a", 3)
    await job.create("b", 3)
    for stream in ("a", "b"):
        await job.produce(stream, keys(30), 5)
    job.start()
    await job.wait_epoch(1)
    await job.expand("b", 6)
    await job.produce("b", keys(30), 5)
    state = await job.wait_epoch(2)
    await job.produce("a", keys(30), 3)
    await job.produce("b", keys(30), 3)
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()
    assert placement(state) == {
        "Partition 0": ([["local", "a", 0], ["local", "b", 0], ["local", "b", 3]], 0, 0),
        "Partition 1": ([["local", "a", 1], ["local", "b", 1], ["local", "b", 4]], 1, 1),
        "Partition 2": ([["local", "a", 2], ["local", "b", 2], ["local", "b", 5]], 2, 0),
    }
    assert state.status.expansions[0].change == "local.b 3→6"


async def test_stream_added_with_a_multiple_count_joins_existing_tasks(
        make_job: Callable[..., CountJob]) -> None:
    """words (2 tasks) + clicks (4 partitions) by config change: clicks p → task p % 2."""
    job = make_job("added", {"words": 2})
    await job.create("words", 2)
    await job.produce("words", keys(30), 5)
    job.start()
    first = await job.wait_epoch(1)
    await job.wait_outputs()
    assert await job.stop() == 0
    job.write("added", {"words": 2, "clicks": 4})
    await job.create("clicks", 4)
    await job.produce("clicks", keys(30), 5)
    job.start()
    state = await job.wait_epoch(2)
    await job.produce("words", keys(30), 2)
    await job.produce("clicks", keys(30), 2)
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()
    assert placement(first) == {"Partition 0": (words("words", range(0, 1)), 0, 0),
                                "Partition 1": (words("words", range(1, 2)), 1, 1)}
    assert placement(state) == {
        "Partition 0": ([["local", "clicks", 0], ["local", "clicks", 2], ["local", "words", 0]],
                        0, 0),
        "Partition 1": ([["local", "clicks", 1], ["local", "clicks", 3], ["local", "words", 1]],
                        1, 1),
    }
    assert {w: r.restored for w, r in state.workers.items()} == {0: 0, 1: 0}


async def test_stream_added_with_another_count_gets_new_tasks_and_changelogs(
        make_job: Callable[..., CountJob]) -> None:
    """words (2 tasks) + clicks (3 partitions): clicks 2 forms a new task, changelog grows."""
    job = make_job("added3", {"words": 2})
    await job.create("words", 2)
    await job.produce("words", keys(30), 5)
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    assert await job.stop() == 0
    job.write("added3", {"words": 2, "clicks": 3})
    await job.create("clicks", 3)
    await job.produce("clicks", keys(30), 5)
    job.start()
    state = await job.wait_epoch(2)
    await job.produce("clicks", keys(30), 2)
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()
    assert placement(state) == {
        "Partition 0": ([["local", "clicks", 0], ["local", "words", 0]], 0, 0),
        "Partition 1": ([["local", "clicks", 1], ["local", "words", 1]], 1, 1),
        "Partition 2": ([["local", "clicks", 2]], 2, 0),
    }
    changelog = job.config.changelog_stream("counts").partition(".")[2]
    assert await job.call(lambda s: s.partition_counts([changelog])) == {changelog: 3}


def set_partition_count(job: CountJob, stream: str, count: int) -> None:
    """Rewrite the stream's count in the log's catalog: the local system cannot shrink a
    stream, so this stands in for a broker whose stream was deleted and re-created."""
    with sqlite3.connect(database_file(job.config.system("local").path)) as conn:
        conn.execute("UPDATE streams SET partitions = ? WHERE name = ?", (count, stream))


async def test_refuses_4_to_6_and_4_to_2_and_keeps_running_exactly(
        make_job: Callable[..., CountJob]) -> None:
    """Both changes are refused loudly (log, status) and words is held: the job stops
    reading it exactly where it grew (never a record written under 6 partitions read under
    4), while its other input, clicks, goes on. Records were written while it had 6, so
    words stays held even back at 4 partitions; `sampan streams discard-held` releases it
    and every count of what the job kept is exact."""
    job = make_job("refuse", {"words": 4, "clicks": 4})
    await job.create("words", 4)
    await job.create("clicks", 4)
    await job.produce("words", keys(40), 5)
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    grown_at = {p: r.end for p, r in (await job.call(lambda s: s.offsets("words"))).items()}
    await job.expand("words", 6)

    async def refused(change: str) -> bool:
        refusal = (await job.state()).status.refusal
        return refusal is not None and refusal.change == change
    await job.wait(lambda: refused("local.words 4→6"), "the refusal of 4→6")
    status = job.sampan("status", "{job}")
    assert status.returncode == 1, status.stderr  # degraded while a change is refused
    assert ("REFUSED local.words 4→6: stream local.words: partition count went from 4 to 6, "
            "refused (4 tasks consume it): partition count 6 is not a multiple of 4: keys would "
            "change tasks; expand to a multiple of 4 (e.g. 8)") in status.stdout
    assert ("local.words is held: the job reads local.words only up to where it had 4 "
            "partitions, on every later count (its other inputs go on)") in status.stdout
    before = await job.output_total()
    held = await produce_on_four(job, 5)  # written after the growth: held, never read under 4
    await job.produce("clicks", keys(40), 3)  # the other input goes on

    async def clicks_done() -> bool:
        return await job.output_total() >= before + 120
    await job.wait(clicks_done, "every clicks record counted")
    checkpoints = await job.checkpoints()
    words_read = {ssp.partition: position for cp in checkpoints.values()
                  for ssp, position in cp.inputs.items() if ssp.stream == "words"}
    assert words_read == grown_at  # exactly where words grew, not one record further
    assert await job.output_total() == before + 120

    set_partition_count(job, "words", 2)
    await job.wait(lambda: refused("local.words 4→6→2"), "the refusal of 4→2")
    document = json.loads(job.sampan("status", "{job}", "--json").stdout)
    assert document["refusal"]["error"].startswith(
        "stream local.words: partition count went from 4 to 2; a decrease drops the keys of the "
        "removed partitions. Restore local.words to 4 partitions (or a multiple of 4) — "
        "partition counts may only grow. local.words is held")
    set_partition_count(job, "words", 4)
    await job.wait(lambda: refused("local.words 4→6→4"), "the hold back at 4 partitions")
    state = await job.state()
    assert state.model is not None and state.model.partition_counts["local.words"] == 4
    assert state.model.holds["local.words"].ends == grown_at
    assert state.status.refusal is not None
    assert state.status.refusal.error.startswith(
        "local.words is held at 4 partitions: records were written past where the job "
        "stopped reading it when its change to 6 partitions was detected")
    assert await job.output_total() == before + 120
    assert await job.stop() == 0

    discard = job.sampan("streams", "discard-held", "local.words", "--job", "{job}")
    assert discard.returncode == 0, discard.stderr
    assert discard.stdout.startswith(
        "discarded 200 records of local.words (local.words 4→6→4): partition 0 offsets "), (
        discard.stdout)
    job.truth.discard(held)
    job.start()
    await produce_on_four(job, 5)
    await job.wait_outputs()
    state = await job.state()
    assert state.model is not None and state.model.holds == {}
    assert state.status.refusal is None
    assert state.status.expansions == []
    assert await job.stop() == 0
    await job.assert_exact()
    log = job.coordinator_log()
    assert "REFUSED partition change local.words 4→6" in log
    assert "REFUSED partition change local.words 4→6→2" in log
    assert "The job keeps running on epoch 1" in log


async def produce_on_four(job: CountJob, rounds: int, names: list[str] | None = None
                          ) -> list[ProducerRecord]:
    """Records keyed as a 4-partition producer places them (partitions 0..3)."""
    names = names or keys(40)
    records = [ProducerRecord(r.stream, r.key, r.value,
                              partition=partition_for_key(r.key or b"", 4))
               for r in job.truth.records("words", names, rounds)]
    await job.call(lambda s: s.produce(records))
    return records


async def test_refused_change_while_stopped_starts_on_the_previous_counts(
        make_job: Callable[..., CountJob]) -> None:
    """4→6 while the job was down: it starts on 4 partitions with words held, read only up
    to where it grew; records were written while it had 6, so growing on to 8 does not
    release it; `sampan streams discard-held` does, and what the job kept is exact."""
    job = make_job("refusestart", {"words": 4})
    await job.create("words", 4)
    await job.produce("words", keys(20), 3)
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    assert await job.stop() == 0
    grown_at = {p: r.end for p, r in (await job.call(lambda s: s.offsets("words"))).items()}
    await job.expand("words", 6)
    held = await job.produce("words", keys(20), 3)  # placed for 6 partitions
    job.start()
    state = await job.wait_epoch(2)
    assert state.model is not None and state.model.partition_counts == {"local.words": 4}
    assert state.model.holds["local.words"].ends == grown_at
    assert state.status.refusal is not None
    assert state.status.refusal.change == "local.words 4→6"
    assert "local.words is held: the job reads local.words only up to where it had 4" in (
        job.coordinator_log())

    async def read() -> dict[int, int]:
        return {ssp.partition: position for cp in (await job.checkpoints()).values()
                for ssp, position in cp.inputs.items()}
    assert await read() == grown_at
    await job.expand("words", 8)

    async def still_held() -> bool:
        refusal = (await job.state()).status.refusal
        return refusal is not None and refusal.change == "local.words 4→6→8"
    await job.wait(still_held, "the hold kept at 8 partitions")
    assert (await job.state()).status.refusal.error.startswith(  # type: ignore[union-attr]
        "local.words is held at 4 partitions: 60 records were written while it had 6 "
        "partitions, which 4 tasks cannot map")
    assert await read() == grown_at
    assert await job.stop() == 0
    discard = job.sampan("streams", "discard-held", "local.words", "--job", "{job}")
    assert discard.returncode == 0, discard.stderr
    assert "discarded 60 records of local.words (local.words 4→6→8)" in discard.stdout
    job.truth.discard(held)
    job.start()
    await job.produce("words", keys(20), 3)
    await job.wait_outputs()
    state = await job.state()
    assert state.model is not None and state.model.partition_counts == {"local.words": 8}
    assert await job.stop() == 0
    await job.assert_exact()
    assert job.coordinator_log().count("REFUSED partition change local.words 4→6:") == 1
