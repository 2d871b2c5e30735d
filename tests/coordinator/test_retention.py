"""Retention of a job's input on the real local log, end to end: the coordinator trims it in
the background while the job stays exact (across an expansion and a full restore), a job
stopped past retention loses nothing — nor does one that has not committed yet, from its
first job model on —, ``drop-unread`` resets it and `sampan status` says so, and the
readers of offsets (reset-offsets, tail, streams list) follow the moved oldest offset."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence

from jobs.outputs import keys
from jobs.runs import CountJob

from framework.config import JobConfig, load_config
from framework.coordinator.retention import retain_once
from framework.drill.timeline import committed_and_end
from framework.systems.base import ProducerRecord, RecordPosition


def with_retention(job: CountJob, stream_keys: str, coordinator_keys: str = "") -> None:
    """Add retention keys to ``local.words`` (and ``[coordinator]``) of the job file."""
    text = job.path.read_text().replace(
        '[streams."local.words"]\n', f'[streams."local.words"]\n{stream_keys}\n')
    job.path.write_text(text.replace("[coordinator]\n", f"[coordinator]\n{coordinator_keys}\n"))
    job.config = load_config(job.path)


def retention_file(job: CountJob, stream_keys: str) -> JobConfig:
    """The same job with retention on ``local.words``, as a second job file declaring it
    (what a coordinator that declares the stream applies in its background pass)."""
    path = job.folder / "with-retention.toml"
    path.write_text(job.path.read_text().replace(
        '[streams."local.words"]\n', f'[streams."local.words"]\n{stream_keys}\n'))
    return load_config(path)


async def retention_pass(job: CountJob, config: JobConfig) -> None:
    await job.call(lambda s: retain_once(config, {"local": s}))


async def produce(job: CountJob, names: Sequence[str], rounds: int
                  ) -> list[tuple[ProducerRecord, RecordPosition]]:
    records = job.truth.records("words", names, rounds)
    positions = await job.call(lambda s: s.produce(records))
    return list(zip(records, positions, strict=True))


async def oldest(job: CountJob) -> dict[int, int]:
    return {p: r.oldest for p, r in (await job.call(lambda s: s.offsets("words"))).items()}


async def test_a_running_job_keeps_its_input_bounded_and_stays_exact(
        make_job: Callable[..., CountJob]) -> None:
    """Retention of ~2 KB per partition every 200 ms while the job counts, expands 2 → 4
    and restores its store fully: its input's oldest offsets move, every output is exact."""
    job = make_job("retaining", {"words": 2})
    with_retention(job, "retention_bytes = 2000", "retention_interval_ms = 200")
    await job.create("words", 2)
    job.start()
    await job.wait_epoch(1)
    for _ in range(4):
        await job.produce("words", keys(20), 3)
        await job.wait_outputs()

    async def trimmed() -> bool:
        sizes = await job.call(lambda s: s.partition_bytes("words"))
        return all(o > 0 for o in (await oldest(job)).values()) and all(
            size <= 2000 for size in sizes.values())
    await job.wait(trimmed, "the input trimmed to 2,000 bytes per partition")
    assert "retention of local.words: deleted " in job.coordinator_log()

    await job.expand("words", 4)  # barriers at the ends; new partitions read from oldest
    await job.wait_epoch(2)
    for _ in range(3):
        await job.produce("words", keys(20), 2)
        await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()

    shutil.rmtree(job.config.state_dir / "stores")  # a full restore from the changelog
    job.start()
    await job.produce("words", keys(20), 1)
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()
    listed = job.sampan("streams", "list", "--job", "{job}").stdout.splitlines()
    row = next(line.split("\t") for line in listed if line.startswith("local.words\t"))
    spans = await job.call(lambda s: s.offsets("words"))
    assert row[1:4] == ["4", ",".join(str(spans[p].oldest) for p in range(4)),
                        ",".join(str(spans[p].end - 1) for p in range(4))]
    assert row[5] == "2000 B/partition, wait-for-readers"


async def test_a_job_stopped_past_retention_loses_nothing(
        make_job: Callable[..., CountJob]) -> None:
    job = make_job("stopped", {"words": 2})
    await job.create("words", 2)
    job.start()
    await job.wait_epoch(1)
    await job.produce("words", keys(20), 3)
    await job.wait_outputs()
    assert await job.stop() == 0
    unread = await produce(job, keys(20), 3)  # written while the job is stopped

    await retention_pass(job, retention_file(job, "retention_bytes = 1\nretention_ms = 1"))
    moved = await oldest(job)
    checkpoints = await job.checkpoints()
    committed = {ssp.partition: offset for cp in checkpoints.values()
                 for ssp, offset in cp.inputs.items()}
    assert all(0 < moved[p] <= committed[p] for p in (0, 1))  # read batches went, no more
    assert all(position.offset >= moved[position.partition] for _, position in unread)

    job.start()
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()


async def test_drop_unread_resets_a_lagging_job_and_its_status_says_so(
        make_job: Callable[..., CountJob]) -> None:
    job = make_job("dropping", {"words": 2})
    await job.create("words", 2)
    job.start()
    await job.wait_epoch(1)
    await job.produce("words", keys(20), 2)
    await job.wait_outputs()
    assert await job.stop() == 0
    unread = await produce(job, keys(20), 2)

    config = retention_file(job, 'retention_bytes = 1\nretention_mode = "drop-unread"')
    await retention_pass(job, config)
    moved = await oldest(job)
    deleted = [record for record, position in unread
               if position.offset < moved[position.partition]]
    assert len(deleted) == len(unread)  # every batch went, read or not
    job.truth.discard(deleted)
    checkpoints = await job.checkpoints()
    assert {ssp.partition: offset for cp in checkpoints.values()
            for ssp, offset in cp.inputs.items()} == moved  # reset to the oldest retained

    status = json.loads(job.sampan("status", "{job}", "--json").stdout)
    resets = status["retention_resets"]
    assert sorted((r["stream"], r["partition"]) for r in resets) == [
        ("local.words", 0), ("local.words", 1)]
    assert all("deleted by retention" in r["message"] for r in resets)
    text = job.sampan("status", "{job}").stdout
    assert text.count("RESET BY RETENTION") == 2

    job.start()
    await job.produce("words", keys(20), 1)
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()  # every kept record once, in order; none of the deleted


async def test_reset_offsets_and_tail_follow_the_moved_oldest_offset(
        make_job: Callable[..., CountJob]) -> None:
    job = make_job("readers", {"words": 2})
    await job.create("words", 2)
    job.start()
    await job.wait_epoch(1)
    await job.produce("words", keys(10), 10)
    await job.wait_outputs()
    assert await job.stop() == 0
    kept = await produce(job, keys(10), 1)
    await retention_pass(job, retention_file(job, "retention_bytes = 1"))
    moved = await oldest(job)
    assert all(moved[p] > 0 for p in (0, 1))

    tail = job.sampan("streams", "tail", "local.words", "--job", "{job}", "--from-beginning",
                      "--until-end", "--json")
    assert tail.returncode == 0, tail.stderr
    rows = [json.loads(line) for line in tail.stdout.splitlines()]
    assert sorted((r["partition"], r["offset"], r["key"], r["value"]["seq"]) for r in rows) == \
        sorted((p.partition, p.offset, (r.key or b"").decode(), json.loads(r.value or b"")["seq"])
               for r, p in kept)

    reset = job.sampan("streams", "reset-offsets", "local.words", "--to", "earliest",
                       "--job", "{job}")
    assert reset.returncode == 0, reset.stderr
    checkpoints = await job.checkpoints()
    assert {ssp.partition: offset for cp in checkpoints.values()
            for ssp, offset in cp.inputs.items()} == moved


async def wait_caught_up(job: CountJob) -> None:
    """Until the job has committed every record of its input (lag 0)."""
    async def caught_up() -> bool:
        committed, end = await job.call(lambda s: committed_and_end(s, job.config))
        return committed == end > 0
    await job.wait(caught_up, "lag 0")


async def test_a_job_holds_its_input_from_its_first_model_before_it_commits(
        make_job: Callable[..., CountJob]) -> None:
    """Issue 47's reproduction, scaled down: retention of 16 KiB per partition every 200 ms
    on an empty input; at once 6,000 records (batches of 1,000, ~24 KB each) reach a job
    that reads 50 at a time, a millisecond each, and commits every 5 s. Its coordinator's
    retention passes run long before that first commit; every record still counts."""
    job = make_job("race", {"words": 2}, task="SlowCountTask",
                   extra="fetch_max_records = 50\n")
    job.path.write_text(job.path.read_text().replace("commit_interval_ms = 100",
                                                     "commit_interval_ms = 5000"))
    with_retention(job, "retention_bytes = 16384", "retention_interval_ms = 200")
    await job.create("words", 2)
    job.start()
    await job.wait_epoch(1)
    await job.produce("words", keys(20), 300)
    await wait_caught_up(job)

    async def trimmed() -> bool:  # retention ran, behind what the job committed
        return all(o > 0 for o in (await oldest(job)).values())
    await job.wait(trimmed, "the input trimmed behind the job's commits")
    assert await job.stop() == 0
    await job.assert_exact()  # every record once, per key in order


async def test_a_job_stopped_before_its_input_arrived_holds_it_against_another_jobs_retention(
        make_job: Callable[..., CountJob]) -> None:
    """A job started and stopped on an empty input, then records arrive while another job
    declaring that stream with retention runs: that job's coordinator keeps every record
    the stopped job has not read, and names it."""
    job = make_job("stopped-early", {"words": 2})
    await job.create("words", 2)
    job.start()
    await job.wait_epoch(1)
    assert await job.stop() == 0
    trimmer = make_job("trimmer", {"idle": 2})  # never gets input: writes no outputs
    text = trimmer.path.read_text().replace('path = "data"', f'path = "{job.folder / "data"}"')
    trimmer.path.write_text(text.replace("[coordinator]\n", "[coordinator]\n"
                                         "retention_interval_ms = 200\n") +
                            '\n[streams."local.words"]\nretention_bytes = 2000\n')
    trimmer.config = load_config(trimmer.path)
    trimmer.start()
    await trimmer.wait_epoch(1)
    for _ in range(30):  # 30 small batches per partition, ~7 KB
        await job.produce("words", keys(20), 1)

    waits = ("retention of local.words partition 0 waits for job 'stopped-early' (task "
             "'Partition 0')")

    async def passed() -> bool:  # a pass over all of partition 0's records, held or not
        logged = trimmer.coordinator_log()
        return waits in logged or "retention of local.words: deleted" in logged
    await trimmer.wait(passed, "a retention pass over local.words")
    assert await trimmer.stop() == 0
    assert await oldest(job) == {0: 0, 1: 0}
    assert waits in trimmer.coordinator_log()

    job.start()
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()


async def test_drop_unread_resets_a_job_that_never_committed_and_says_so(
        make_job: Callable[..., CountJob]) -> None:
    job = make_job("never-committed", {"words": 2})
    await job.create("words", 2)
    job.start()
    await job.wait_epoch(1)
    assert await job.stop() == 0
    unread = [await produce(job, keys(20), 1) for _ in range(3)]  # three batches each

    config = retention_file(job, 'retention_bytes = 1\nretention_mode = "drop-unread"')
    await retention_pass(job, config)
    moved = await oldest(job)
    deleted = [record for batch in unread for record, position in batch
               if position.offset < moved[position.partition]]
    assert len(deleted) == sum(map(len, unread))
    job.truth.discard(deleted)
    checkpoints = await job.checkpoints()
    assert {(task, ssp.partition, offset) for task, cp in checkpoints.items()
            for ssp, offset in cp.inputs.items()} == {
        ("Partition 0", 0, moved[0]), ("Partition 1", 1, moved[1])}

    status = json.loads(job.sampan("status", "{job}", "--json").stdout)
    assert sorted((r["stream"], r["partition"], r["task"], r["from"])
                  for r in status["retention_resets"]) == [
        ("local.words", 0, "Partition 0", 0), ("local.words", 1, "Partition 1", 0)]
    assert job.sampan("status", "{job}").stdout.count("RESET BY RETENTION") == 2

    job.start()
    await job.produce("words", keys(20), 1)
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()  # every kept record once, in order; none of the deleted
