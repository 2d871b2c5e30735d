"""Where a job starts reading an input it has no checkpoint on, on the real local log, end to
end: ``start_position = "latest"`` or a time, fixed at the job's first model (a restart
before the first commit starts there too); partitions an expansion adds are read from
their first record whatever the setting; `sampan streams reset-offsets` prepares a job that
never ran, and retention keeps what lies past the positions it wrote. Every output is
checked: one per kept input record, per key in order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from jobs.outputs import keys
from jobs.runs import CountJob

from framework.config import load_config
from framework.coordinator.retention import retain_once
from framework.systems.base import ProducerRecord


def start_at(job: CountJob, spelled: str) -> None:
    """Set ``start_position`` of the job's input ``local.words``."""
    table = '[streams."local.words"]\n'
    job.path.write_text(job.path.read_text().replace(
        table, f"{table}start_position = {spelled}\n"))
    job.config = load_config(job.path)


async def ends(job: CountJob) -> dict[int, int]:
    return {p: r.end for p, r in (await job.call(lambda s: s.offsets("words"))).items()}


async def positions(job: CountJob) -> set[tuple[str, int, int]]:
    """(task, partition, offset) of every checkpointed input position of the job."""
    return {(task, ssp.partition, offset) for task, cp in (await job.checkpoints()).items()
            for ssp, offset in cp.inputs.items()}


async def produce_stamped(job: CountJob, rounds: int, timestamp: int) -> list[ProducerRecord]:
    records = [replace(r, timestamp=timestamp)
               for r in job.truth.records("words", keys(20), rounds)]
    await job.call(lambda s: s.produce(records))
    return records


async def test_a_latest_start_reads_what_comes_after_the_first_model_also_after_a_restart(
        make_job: Callable[..., CountJob]) -> None:
    job = make_job("latest", {"words": 2})
    start_at(job, '"latest"')
    await job.create("words", 2)
    job.truth.discard(await job.produce("words", keys(20), 3))  # before the job's start
    job.start()
    await job.wait_epoch(1)
    first = await ends(job)
    assert await positions(job) == {("Partition 0", 0, first[0]), ("Partition 1", 1, first[1])}
    assert await job.stop() == 0  # nothing read, nothing committed
    await job.produce("words", keys(20), 2)  # while it is stopped: after its start, kept
    job.start()
    await job.wait_epoch(2)
    await job.produce("words", keys(20), 2)
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()


async def test_a_time_start_reads_from_the_first_record_stamped_at_or_after_it(
        make_job: Callable[..., CountJob]) -> None:
    """Stamps 1,000 s, then 2,000 s, then 1,500 s; a start at 2,000 s skips the first and
    reads on from the second: what follows is read whatever its stamp."""
    job = make_job("timed", {"words": 2})
    start_at(job, '"1970-01-01T00:33:20Z"')  # 2,000,000 ms
    await job.create("words", 2)
    job.truth.discard(await produce_stamped(job, 2, 1_000_000))
    await produce_stamped(job, 2, 2_000_000)
    await produce_stamped(job, 1, 1_500_000)
    job.start()
    await job.wait_epoch(1)
    await job.produce("words", keys(20), 1)
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()


async def test_partitions_an_expansion_adds_are_read_from_their_first_record_after_a_latest_start(
        make_job: Callable[..., CountJob]) -> None:
    """A job started at "latest" on 2 partitions; the input grows to 4 while it runs and
    records go into the new partitions at once, before the coordinator sees the growth:
    the new partitions are read from offset 0, every record counted in order."""
    job = make_job("grown", {"words": 2})
    start_at(job, '"latest"')
    await job.create("words", 2)
    job.truth.discard(await job.produce("words", keys(40), 2))
    job.start()
    await job.wait_epoch(1)
    await job.produce("words", keys(40), 2)
    await job.wait_outputs()
    await job.expand("words", 4)
    await job.produce("words", keys(40), 2)  # into all four partitions, before detection
    await job.wait_epoch(2)
    assert all(end > 0 for end in (await ends(job)).values())
    await job.produce("words", keys(40), 2)
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()


async def test_reset_offsets_prepares_a_job_that_never_ran_and_retention_keeps_what_follows(
        make_job: Callable[..., CountJob]) -> None:
    job = make_job("prepared", {"words": 2})
    await job.create("words", 2)
    job.truth.discard(await job.produce("words", keys(20), 3))
    reset = job.sampan("streams", "reset-offsets", "local.words", "--to", "latest",
                       "--job", "{job}")
    assert reset.returncode == 0, reset.stderr
    assert "reset 2 partitions of local.words to latest" in reset.stdout
    prepared = await ends(job)
    assert await positions(job) == {("Partition 0", 0, prepared[0]),
                                    ("Partition 1", 1, prepared[1])}
    await job.produce("words", keys(20), 2)  # the job's first records

    trimmer = job.folder / "trimmer.toml"  # another job file declaring the stream
    table = '[streams."local.words"]\n'
    trimmer.write_text(job.path.read_text().replace('name = "prepared"', 'name = "trimmer"')
                       .replace(table, f"{table}retention_bytes = 1\n"))
    result = await job.call(lambda s: retain_once(load_config(trimmer), {"local": s}))
    assert result["local.words"].batches > 0
    assert {p: r.oldest for p, r in (await job.call(lambda s: s.offsets("words"))).items()} \
        == prepared  # what preceded the reset went; what follows waits for the job

    job.start()
    await job.wait_epoch(1)
    await job.produce("words", keys(20), 1)
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()


async def test_reset_offsets_to_a_time_sets_each_partition_at_its_first_record_stamped_then(
        make_job: Callable[..., CountJob]) -> None:
    job = make_job("reset-to-time", {"words": 2})
    await job.create("words", 2)
    job.truth.discard(await produce_stamped(job, 2, 1_000_000))
    mark = await ends(job)
    await produce_stamped(job, 2, 2_000_000)
    naive = job.sampan("streams", "reset-offsets", "local.words", "--to",
                       "1970-01-01T00:33:20", "--job", "{job}")
    assert naive.returncode == 2 and "has no zone" in naive.stderr
    reset = job.sampan("streams", "reset-offsets", "local.words", "--to",
                       "1970-01-01T00:33:20Z", "--job", "{job}")
    assert reset.returncode == 0, reset.stderr
    assert "to 1970-01-01T00:33:20.000Z" in reset.stdout
    assert await positions(job) == {("Partition 0", 0, mark[0]), ("Partition 1", 1, mark[1])}
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()
