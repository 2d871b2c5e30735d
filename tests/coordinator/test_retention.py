"""Retention of a job's input on the real local log, end to end: the coordinator trims it in
the background while the job stays exact (across an expansion and a full restore), a job
stopped past retention loses nothing, ``drop-unread`` resets it and `sampan status` says
so, and the readers of offsets (reset-offsets, tail, streams list) follow the moved oldest
offset."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence

from coordjobs import Job, keys

from framework.config import JobConfig, load_config
from framework.coordinator.retention import retain_once
from framework.systems.base import ProducerRecord, RecordPosition


def with_retention(job: Job, stream_keys: str, coordinator_keys: str = "") -> None:
    """Add retention keys to ``local.words`` (and ``[coordinator]``) of the job file."""
    text = job.path.read_text().replace(
        '[streams."local.words"]\n', f'[streams."local.words"]\n{stream_keys}\n')
    job.path.write_text(text.replace("[coordinator]\n", f"[coordinator]\n{coordinator_keys}\n"))
    job.config = load_config(job.path)


def retention_file(job: Job, stream_keys: str) -> JobConfig:
    """The same job with retention on ``local.words``, as a second job file declaring it
    (what a coordinator that declares the stream applies in its background pass)."""
    path = job.folder / "with-retention.toml"
    path.write_text(job.path.read_text().replace(
        '[streams."local.words"]\n', f'[streams."local.words"]\n{stream_keys}\n'))
    return load_config(path)


async def retention_pass(job: Job, config: JobConfig) -> None:
    await job.call(lambda s: retain_once(config, {"local": s}))


async def produce(job: Job, names: Sequence[str], rounds: int
                  ) -> list[tuple[ProducerRecord, RecordPosition]]:
    records = job.truth.records("words", names, rounds)
    positions = await job.call(lambda s: s.produce(records))
    return list(zip(records, positions, strict=True))


async def oldest(job: Job) -> dict[int, int]:
    return {p: r.oldest for p, r in (await job.call(lambda s: s.offsets("words"))).items()}


async def test_a_running_job_keeps_its_input_bounded_and_stays_exact(
        make_job: Callable[..., Job]) -> None:
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


async def test_a_job_stopped_past_retention_loses_nothing(make_job: Callable[..., Job]) -> None:
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
        make_job: Callable[..., Job]) -> None:
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
        make_job: Callable[..., Job]) -> None:
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
