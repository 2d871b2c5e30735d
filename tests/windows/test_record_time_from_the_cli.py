"""Record timestamps from `sampan streams produce`, and idle partitions: the default event
time (the record timestamp) exercised from the CLI on the local log, and an input
partition that never delivers releasing the task's watermark after
``job.input_idle_timeout_ms`` (a task reading ``local.views`` and ``local.clicks``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jobs.runs import LocalJob

from framework.systems.base import System
from groupers import SystemStreamPartition

HERE = Path(__file__).resolve().parent

JOB = """\
[job]
name = "idle"
task = "idle_task:IdleTask"
inputs = ["local.views", "local.clicks"]
commit_interval_ms = 100
window_interval_ms = 200
input_idle_timeout_ms = 1000

[systems.local]
type = "local"
path = "data"

[streams."local.views"]
partitions = 2
[streams."local.clicks"]
partitions = 2
[streams."local.counts"]
[streams."local.late"]

[stores.w]
"""


def lines(*records: dict[str, Any]) -> str:
    return "".join(json.dumps(record) + "\n" for record in records)


def make_job(folder: Path) -> LocalJob:
    return LocalJob(folder, JOB, {"idle_task.py": (HERE / "idle_task.py").read_text()})


async def test_produce_sets_the_record_timestamp(tmp_path: Path) -> None:
    job = make_job(tmp_path / "job")
    done = job.sampan("streams", "produce", "local.views", "--job", "{job}", stdin=lines(
        {"key": "a", "value": {"n": 1}, "timestamp": 1_700_000_000_123},
        {"key": "b", "value": {"n": 2}, "timestamp": 0, "partition": 1}))
    assert (done.returncode, done.stderr.splitlines()[-1]) == (
        0, "produced 2 records to local.views")

    async def read(system: System) -> dict[bytes | None, int]:
        consumer = system.consumer()
        consumer.assign({SystemStreamPartition("local", "views", p): 0 for p in (0, 1)})
        try:
            batch = await consumer.fetch(10, timeout_ms=500)
        finally:
            await consumer.close()
        return {record.key: record.timestamp for records in batch.values()
                for record in records}

    assert await job.call(read) == {b"a": 1_700_000_000_123, b"b": 0}
    for bad in ("-1", '"12:00"', "1.5"):
        refused = job.sampan("streams", "produce", "local.views", "--job", "{job}",
                             stdin=f'{{"key": "a", "value": 1, "timestamp": {bad}}}\n')
        assert refused.returncode == 2
        assert refused.stderr.splitlines()[-1] == (
            f'sampan streams: error: stdin line 1: "timestamp" must be the record\'s time in '
            f'milliseconds since the epoch, an integer ≥ 0, got {json.loads(bad)!r}')


async def test_an_idle_partition_stops_holding_the_watermark(tmp_path: Path) -> None:
    """Task ``Partition 0`` reads partition 0 of views and of clicks; clicks delivers
    nothing, so after the idle timeout windows close by the views' time alone. Then a
    click behind that watermark is late, one ahead of it counts."""
    job = make_job(tmp_path / "job")
    await job.create_streams({"views": 2, "clicks": 2, "counts": 1, "late": 1})
    views = ("streams", "produce", "local.views", "--job", "{job}")
    clicks = ("streams", "produce", "local.clicks", "--job", "{job}")
    assert job.sampan(*views, stdin=lines(
        {"key": "a", "value": {}, "timestamp": 1_000, "partition": 0},
        {"key": "b", "value": {}, "timestamp": 5_000, "partition": 0},
        {"key": "a", "value": {}, "timestamp": 12_000, "partition": 0},
        {"key": "b", "value": {}, "timestamp": 25_000, "partition": 0})).returncode == 0
    job.start()
    try:
        async def closed_by_views() -> bool:
            return len(await job.values("counts")) == 3

        await job.wait(closed_by_views, "the windows before 20 s to close")
        assert [(key, v["start"], v["value"]) for key, v in await job.keyed_values("counts")
                ] == [("a", 0, 1), ("b", 0, 1), ("a", 10_000, 1)]
        end = {"key": "~end", "value": {"watermark": 10**15}}
        assert job.sampan(*clicks, stdin=lines(
            {"key": "c", "value": {}, "timestamp": 3_000, "partition": 0},   # behind: late
            {"key": "d", "value": {}, "timestamp": 27_000, "partition": 0},  # ahead: counts
            *({**end, "partition": p} for p in (0, 1)))).returncode == 0
        assert job.sampan(*views, stdin=lines(
            *({**end, "partition": p} for p in (0, 1)))).returncode == 0
        await job.wait(lambda: job.caught_up_on("views", "clicks"), "everything committed")
        assert await job.stop() == 0
    finally:
        job.kill()
    assert [(key, v["start"], v["value"]) for key, v in await job.keyed_values("counts")] == [
        ("a", 0, 1), ("b", 0, 1), ("a", 10_000, 1), ("b", 20_000, 1), ("d", 20_000, 1)]
    [(key, letter)] = await job.keyed_values("late")
    assert (key, letter["stream"], letter["ts"], letter["watermark"]) == (
        "c", "local.clicks", 3_000, 25_000)
