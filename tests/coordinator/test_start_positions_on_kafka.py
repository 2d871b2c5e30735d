"""Where a job starts reading its input on real Apache Kafka: ``start_position = "latest"``
and a time (ListOffsets by timestamp), each on the per-key sum job run by `sampan run`,
and "latest" on a job run by hosts (the group leader publishes its models); every output
checked (one per record read, the key's running sum, in order) and none for the records
before the start."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from jobs.outputs import Workload, exact_problems
from jobs.runs import KafkaSumJob

from framework.config import load_config
from framework.drill.hosts_job import HostProcesses


@pytest.fixture
def jobs(kafka_broker: Any) -> Iterator[list[KafkaSumJob]]:
    """The test's jobs; every `sampan run` they started is killed at the end."""
    made: list[KafkaSumJob] = []
    yield made
    for job in made:
        job.kill()


async def started_at(jobs: list[KafkaSumJob], tmp_path: Path, bootstrap: str, tag: str,
                     spelled: str) -> KafkaSumJob:
    """A sum job whose input (created, empty) has ``start_position = <spelled>``."""
    job = KafkaSumJob(tmp_path / tag, bootstrap, f"ks-{tag}-{os.getpid()}")
    jobs.append(job)
    table = f'[streams."kafka.{job.events}"]\n'
    job.path.write_text(job.path.read_text().replace(
        table, f"{table}start_position = {spelled}\n"))
    job.config = load_config(job.path)
    await job.call(lambda s: s.create_stream(job.events, 2))
    return job


async def test_a_latest_start_on_kafka_reads_only_what_comes_after_the_first_model(
        jobs: list[KafkaSumJob], tmp_path: Path, kafka_broker: Any) -> None:
    job = await started_at(jobs, tmp_path, kafka_broker.bootstrap, "latest", '"latest"')
    before = Workload(keys=30, stream=job.events, key_prefix="before")
    after = Workload(keys=30, stream=job.events, key_prefix="after", seed=11)
    await job.send(before.records(300))
    job.start()
    await job.wait_epoch(1)
    await job.send(after.records(300))
    await job.wait_caught_up(before.count + after.count)
    assert await job.stop() == 0
    assert exact_problems(await job.outputs(), after) == []  # none for "before" keys
    assert await job.store() == after.totals


async def test_a_time_start_on_kafka_reads_from_the_first_record_stamped_at_or_after_it(
        jobs: list[KafkaSumJob], tmp_path: Path, kafka_broker: Any) -> None:
    """Records stamped two minutes ago, then one minute ago, then three minutes ago; a
    start at 90 s ago skips the first and reads on from the second, whatever follows."""
    now = int(time.time() * 1000)
    job = await started_at(jobs, tmp_path, kafka_broker.bootstrap, "time", str(now - 90_000))
    before = Workload(keys=30, stream=job.events, key_prefix="before")
    after = Workload(keys=30, stream=job.events, key_prefix="after", seed=11)
    await job.send([replace(r, timestamp=now - 120_000) for r in before.records(300)])
    await job.send([replace(r, timestamp=now - 60_000) for r in after.records(300)])
    await job.send([replace(r, timestamp=now - 180_000) for r in after.records(100)])
    job.start()
    await job.wait_epoch(1)
    await job.send(after.records(100))
    await job.wait_caught_up(before.count + after.count)
    assert await job.stop() == 0
    assert exact_problems(await job.outputs(), after) == []
    assert await job.store() == after.totals


async def test_a_latest_start_holds_when_the_group_leader_publishes_the_model(
        jobs: list[KafkaSumJob], tmp_path: Path, kafka_broker: Any) -> None:
    job = await started_at(jobs, tmp_path, kafka_broker.bootstrap, "hosts", '"latest"')
    before = Workload(keys=30, stream=job.events, key_prefix="before")
    after = Workload(keys=30, stream=job.events, key_prefix="after", seed=11)
    await job.send(before.records(300))
    hosts = HostProcesses(job.path, tmp_path)
    try:
        hosts.start("a")

        async def published() -> bool:
            assert not hosts.dead(), (tmp_path / "host-a.log").read_text()
            model = (await job.state()).model
            return model is not None and list(model.hosts) == ["a"]
        await job.wait(published, "host a's first model")
        await job.send(after.records(300))
        await job.wait_caught_up(before.count + after.count)
    finally:
        hosts.stop_all()
    assert exact_problems(await job.outputs(), after) == []
    assert await job.store() == after.totals
