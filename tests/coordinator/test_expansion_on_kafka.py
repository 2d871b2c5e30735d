"""Live expansion on real Apache Kafka: `sampan streams expand` (CreatePartitions) while
`sampan run` processes, 2 → 4 → 8, checked record by record.

Each test runs the per-key sum job (`tests/jobs/sum_task.py`) on topics named after it on
the session's broker; every output is checked: one per input record, the key's running
sum, in order (see `harness.exact_problems`).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from jobs.outputs import Workload, exact_problems, replay_problems
from jobs.runs import KafkaSumJob

from framework.partitioner import partition_for_key
from groupers import SystemStreamPartition


@pytest.fixture
def jobs(tmp_path: Path, kafka_broker: Any) -> Iterator[list[KafkaSumJob]]:
    """The test's jobs; every `sampan run` they started is killed at the end."""
    made: list[KafkaSumJob] = []
    yield made
    for job in made:
        job.kill()


def make_job(jobs: list[KafkaSumJob], tmp_path: Path, bootstrap: str, tag: str,
             **options: Any) -> KafkaSumJob:
    job = KafkaSumJob(tmp_path / tag, bootstrap, f"kx-{tag}-{os.getpid()}", **options)
    jobs.append(job)
    return job


async def kill_at_publication(job: KafkaSumJob, worker: int, epoch: int) -> int:
    """SIGKILL worker ``worker`` as soon as the model of ``epoch`` is published: the
    workers take it in place, so the victim is caught before, while or just after it
    takes it (its commits of either epoch in flight)."""
    async def published() -> int | None:
        state = await job.state()
        if state.model is None or state.model.epoch < epoch:
            return None
        return state.status.worker_pids.get(worker)
    victim: int = await job.wait(published, f"epoch {epoch} published")
    with contextlib.suppress(ProcessLookupError):  # already gone: the checks say why
        os.kill(victim, signal.SIGKILL)
    return victim


@pytest.mark.parametrize(("store", "guarantee"), [
    ("rocksdb", "exactly-once"), ("memory", "exactly-once"),
    ("rocksdb", "at-least-once"), ("memory", "at-least-once"),
])
async def test_two_expansions_with_a_worker_killed_mid_expansion(
        jobs: list[KafkaSumJob], tmp_path: Path, kafka_broker: Any, store: str,
        guarantee: str) -> None:
    """2 → 4 → 8 while records flow, taken in place by the running workers; the 4 → 8
    switch loses worker 1 to SIGKILL the moment its model is published. Exactly-once:
    every output once, in order; at-least-once: a replay of already emitted outputs at
    most, none lost; the store exact either way. Worker 0 is never restarted."""
    job = make_job(jobs, tmp_path, kafka_broker.bootstrap, f"{store}-{guarantee[:5]}",
                   store=store, guarantee=guarantee)
    work = Workload(keys=60, stream=job.events)
    job.start()
    first = await job.wait_epoch(1)
    await job.send(work.records(1500))
    for epoch, count in ((2, 4), (3, 8)):
        job.expand(count)
        await job.send(work.records(800))  # into the new partitions before detection
        if count == 8:
            await kill_at_publication(job, 1, epoch)
        state = await job.wait_epoch(epoch)
        assert state.model is not None
        assert state.model.partition_counts == {f"kafka.{job.events}": count}
        await job.send(work.records(800))
    await job.wait_caught_up(work.count)
    assert await job.stop() == 0
    state = await job.state()
    assert [e.change for e in state.status.expansions] == [
        f"kafka.{job.events} 2→4", f"kafka.{job.events} 4→8"]
    assert state.model is not None and sorted(state.model.tasks) == [
        "Partition 0", "Partition 1"]
    assert state.status.restarts >= 1
    assert all(e.in_place for e in state.status.expansions)
    assert state.workers[0].pid == first.workers[0].pid  # taken in place twice
    assert state.workers[0].in_place_changes == 2
    found = await job.outputs()
    if guarantee == "exactly-once":
        assert exact_problems(found, work) == []
    else:
        assert replay_problems(found, work) == []
    assert await job.store() == work.totals


async def test_a_producer_with_stale_metadata_keeps_sums_exact(
        jobs: list[KafkaSumJob], tmp_path: Path, kafka_broker: Any) -> None:
    """An aiokafka producer that never refreshes its metadata (``metadata_max_age_ms`` 10
    min) keeps writing its keys to their partitions under 2 while the topic grows to 4 and
    8: those records land after the expansion barriers, in partitions of the task that owns
    the key. After it finally refreshes (the workers frozen meanwhile, so 4,000 of its
    records in the old partitions are still unread), its keys continue in their new
    partitions, and each key's outputs are still its running sums, one per record, in the
    order produced: the new partitions are read in record-time order with the old ones
    (`job.expansion_merge_ms`, docs/coordinator.md)."""
    job = make_job(jobs, tmp_path, kafka_broker.bootstrap, "stale")
    fresh = Workload(keys=40, stream=job.events, key_prefix="fresh")
    stale = Workload(keys=40, stream=job.events, key_prefix="stale", seed=11)
    landed: dict[tuple[str, int], tuple[int, int]] = {}  # (key, n) -> (partition, offset)
    sent: dict[str, int] = {}  # key -> its records written so far
    barriers: dict[SystemStreamPartition, int] = {}  # the latest barrier of each old SSP
    producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap,
                                metadata_max_age_ms=600_000)
    job.start()
    await producer.start()
    try:
        async def send_stale(count: int) -> None:
            records = stale.records(count)
            futures = [await producer.send(job.events, r.value, key=r.key) for r in records]
            for record, future in zip(records, futures, strict=True):
                metadata = await future
                key = record.key.decode()
                sent[key] = sent.get(key, 0) + 1
                landed[(key, sent[key])] = (metadata.partition, metadata.offset)

        await job.wait_epoch(1)
        await send_stale(400)
        await job.send(fresh.records(400))
        for epoch, count in ((2, 4), (3, 8)):
            job.expand(count)
            await send_stale(400)
            await job.send(fresh.records(400))
            state = await job.wait_epoch(epoch)
            assert state.model is not None
            for task in state.model.tasks.values():
                barriers.update(task.stages[-1].barrier)
            await send_stale(400)
            await job.send(fresh.records(400))
        # The switch with a backlog: the workers are frozen (SIGSTOP) while the producer
        # writes 4,000 records to the old partitions and then 400 to the new ones.
        frozen = list(job.worker_pids().values())
        assert len(frozen) == 2
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        try:
            await send_stale(4000)
            assert await producer.partitions_for(job.events) == {0, 1}  # still stale
            await producer.client.force_metadata_update()
            assert await producer.partitions_for(job.events) == set(range(8))
            await send_stale(400)
        finally:
            for pid in frozen:
                os.kill(pid, signal.SIGCONT)
    finally:
        await producer.stop()
    await job.wait_caught_up(fresh.count + stale.count)
    assert await job.stop() == 0

    after_barrier = [
        (key, n) for (key, n), (partition, offset) in landed.items()
        if partition < 2 and partition_for_key(key.encode(), 8) >= 2
        and offset >= barriers[SystemStreamPartition("kafka", job.events, partition)]]
    assert after_barrier, "the stale producer wrote no moved key after a barrier"

    found = await job.outputs()
    assert exact_problems({k: v for k, v in found.items() if k.startswith("fresh")},
                          fresh) == []
    assert exact_problems({k: v for k, v in found.items() if k.startswith("stale")},
                          stale) == []
    assert set(found) == {*fresh.amounts, *stale.amounts}
    assert await job.store() == {**fresh.totals, **stale.totals}


async def test_expand_names_the_missing_api_on_a_broker_without_create_partitions(
        tansu_broker: Any, tmp_path: Path) -> None:
    """tansu has no CreatePartitions: `sampan streams expand` exits 2 at once, naming it."""
    job = KafkaSumJob(tmp_path / "tansu", tansu_broker.bootstrap, f"kx-tansu-{os.getpid()}")
    await job.call(lambda s: s.create_stream(job.events, 2))
    done = job.sampan("streams", "expand", f"kafka.{job.events}", "--partitions", "4",
                      "--job", "{job}")
    assert done.returncode == 2
    assert "CreatePartitions" in done.stderr
    assert f"stream {job.events!r} stays at 2" in done.stderr
    assert await job.call(lambda s: s.partition_counts([job.events])) == {job.events: 2}
