"""An input deleted and created again: never skipped in silence — refused with the remedy,
`sampan streams reset-offsets`, which makes the job go on exactly."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from jobs.outputs import keys
from jobs.runs import CountJob


def drop_stream(job: CountJob, stream: str) -> None:
    """Delete a stream of the job's local log, as an operator deleting a topic would."""
    connection = sqlite3.connect(job.folder / "data" / "log.sqlite3", isolation_level=None)
    connection.execute("BEGIN IMMEDIATE")
    (stream_id,) = connection.execute("SELECT id FROM streams WHERE name = ?",
                                      (stream,)).fetchone()
    for table in ("batches", "partitions"):
        connection.execute(f"DELETE FROM {table} WHERE stream_id = ?", (stream_id,))
    connection.execute("DELETE FROM streams WHERE id = ?", (stream_id,))
    connection.execute("COMMIT")
    connection.close()


REFUSAL = ("input local.words was deleted and created again, or truncated: task "
           "'Partition 0' has read local.words[0] up to offset")


async def test_a_recreated_input_is_refused_until_its_offsets_are_reset(
        make_job: Callable[..., CountJob]) -> None:
    job = make_job("recreated", {"words": 2})
    await job.create("words", 2)
    await job.produce("words", keys(30), 10)
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    assert await job.stop() == 0

    drop_stream(job, "words")
    await job.create("words", 2)
    await job.produce("words", keys(30), 1)  # offsets start again at 0
    done = job.sampan("run", "{job}")
    assert done.returncode == 2
    line = done.stderr.splitlines()[-1]
    assert f"REFUSED: {REFUSAL}" in done.stderr
    assert line.startswith("sampan run: error: " + REFUSAL), line
    assert line.endswith(
        f"reading on would skip its first records. Stop the job and choose where it "
        f"continues: `sampan streams reset-offsets local.words --job {job.path} --to "
        f"earliest` (read everything the stream holds now) or `--to latest` (only what comes "
        f"next)")
    status = job.sampan("status", "{job}")
    assert "lag -" not in status.stdout
    assert "CHECKPOINT PAST THE END" in status.stdout

    reset = job.sampan("streams", "reset-offsets", "local.words", "--job", "{job}", "--to",
                       "earliest")
    assert reset.returncode == 0, reset.stderr
    assert reset.stdout.splitlines()[-1] == (
        f"reset 2 partitions of local.words to earliest; start the job with `sampan run "
        f"{job.path}`")
    assert "Partition 0: local.words[0] " in reset.stdout and " → 0" in reset.stdout
    job.start()
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()  # every new record counted once, on top of the kept counts


async def test_an_input_recreated_while_running_stops_the_job_naming_the_remedy(
        make_job: Callable[..., CountJob]) -> None:
    job = make_job("recreating", {"words": 2})
    await job.create("words", 2)
    await job.produce("words", keys(30), 10)
    process = job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    drop_stream(job, "words")
    # The running job may create its declared input again first (a new stream either way).
    await job.call(lambda s: s.create_stream("words", 2, exist_ok=True))

    async def exited() -> bool:
        return process.poll() is not None
    job.process = None
    await job.wait(exited, "sampan run to refuse the recreated input")
    job.process = process
    assert process.returncode == 2
    assert f"REFUSED: {REFUSAL}" in job.coordinator_log()
    assert job.coordinator_log().splitlines()[-1].startswith(
        "sampan run: error: " + REFUSAL)


async def test_reset_offsets_refuses_while_the_job_runs(make_job: Callable[..., CountJob]) -> None:
    job = make_job("busy", {"words": 2})
    await job.create("words", 2)
    first = job.start()
    await job.wait_epoch(1)
    done = job.sampan("streams", "reset-offsets", "local.words", "--job", "{job}", "--to",
                      "latest")
    assert done.returncode == 2
    assert f"job 'busy' is already running: its coordinator is pid {first.pid}" in done.stderr
    assert await job.stop() == 0


async def test_a_commit_between_reading_ends_and_checking_is_not_a_truncation(
        make_job: Callable[..., CountJob]) -> None:
    """The input check reads checkpoints before the end offsets: a worker that commits
    past the ends read a moment ago (records produced meanwhile) is no truncation."""
    from dataclasses import replace

    from framework.coordinator.process import Coordinator
    from framework.systems.base import CommitRequest

    job = make_job("commit-between", {"words": 2})
    await job.create("words", 2)
    await job.produce("words", keys(30), 10)
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    assert await job.stop() == 0
    before = await job.checkpoints()

    coordinator = Coordinator(job.config, start_workers=False)
    await coordinator.open_systems()
    system = coordinator.systems["local"]
    read_offsets = system.offsets

    async def offsets_then_a_commit(stream: str) -> Any:
        ends = await read_offsets(stream)  # the ends, then a worker's commit past them
        await job.produce("words", keys(30), 2)
        await system.commit(CommitRequest(job=job.config.name, epoch=checkpoint.epoch,
                                          checkpoints=[replace(checkpoint, inputs={
                                              ssp: offset + 20 for ssp, offset
                                              in checkpoint.inputs.items()})]))
        return ends

    checkpoint = before["Partition 0"]
    system.offsets = offsets_then_a_commit  # type: ignore[method-assign]
    try:
        await coordinator._check_inputs()
    finally:
        system.offsets = read_offsets  # type: ignore[method-assign]
        for opened in coordinator.systems.values():
            await opened.close()
    after = await job.checkpoints()
    assert after["Partition 0"].inputs != before["Partition 0"].inputs  # the commit landed
