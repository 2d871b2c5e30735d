"""Exactly-once on Kafka through crashes: SIGKILLed workers and a SIGSTOPped zombie."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
from pathlib import Path

from eos_jobs import checkpointed, eos_job, output_records
from jobs import harness as h
from kafka_broker import KafkaBroker

from framework.coordinator.builder import build_job_model
from framework.metadata import publish_model
from framework.systems.kafka.system import KafkaSystem
from framework.systems.kafka.txn import PRODUCER_PREFIX

RECORDS = 100_000
KEYS = 1_000


async def test_five_sigkills_lose_and_duplicate_nothing(kafka_broker: KafkaBroker,
                                                        tmp_path: Path) -> None:
    """`sampan worker` SIGKILLed at five random points mid-run and restarted: a
    read_committed reader sees exactly one output per input record, each key's outputs
    are its running sums in order, and the store's changelog holds the true totals."""
    path = eos_job(tmp_path, kafka_broker.bootstrap)
    config = h.load(path)
    meta = await h.open_meta(config)
    rng = random.Random(2026)
    kill_points = [step * RECORDS // 8 + rng.randrange(-3_000, 3_000) for step in range(1, 6)]
    try:
        await h.prepare(config, meta)
        work = h.Workload(KEYS, stream=h.streams(config)[0])
        records = work.records(RECORDS)
        produced = 0
        killed = []
        with (tmp_path / "worker.log").open("ab") as log:
            for point in kill_points:
                # Input only up to 25k past the kill point, the rest after the last kill:
                # however fast the worker, every kill lands before the job's end (mid
                # commit, mid batch, or waiting for more input).
                ahead = min(RECORDS, point + 25_000)
                await h.produce(meta, records[produced:ahead])
                produced = ahead
                worker = h.start_worker(path, log)
                try:
                    async def reached(target: int = point) -> bool:
                        return await checkpointed(meta, config) >= target

                    await h.wait_until(reached, 180, f"{point} inputs committed", worker)
                    await asyncio.sleep(rng.uniform(0, 0.1))  # land anywhere in a commit
                finally:
                    h.kill(worker)
                killed.append(worker.returncode)
                assert await checkpointed(meta, config) < RECORDS, "killed after the end"
            await h.produce(meta, records[produced:])
            worker = h.start_worker(path, log)
            try:
                async def finished() -> bool:
                    return await checkpointed(meta, config) >= RECORDS

                await h.wait_until(finished, 180, "every input committed", worker)
                assert await h.stop(worker) == 0
            finally:
                h.kill(worker)
        assert killed == [-9] * 5
        assert await checkpointed(meta, config) == RECORDS
        assert await output_records(meta, config) == RECORDS
        assert h.exact_problems(await h.outputs(meta, config), work) == []
        assert await h.changelog_state(meta, config) == work.totals
    finally:
        await meta.close()


async def test_a_zombie_worker_cannot_commit(kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    """A worker paused with SIGSTOP while its replacement starts, then resumed, is fenced:
    it exits 3 and nothing it wrote after the replacement started is ever read. The
    replacement runs from a copy of the job folder, as on another host (the zombie still
    holds its RocksDB stores), and restores the stores from the changelog. Broker calls
    may take 120 s, so the pause never turns into a timeout (exit 2) instead of a fence.

    The zombie is resumed only once the replacement has recorded its own producer (so it
    has fenced the zombie's), and the second half of the input is produced only then: the
    zombie always has records to process and commit after it resumes, however far it got
    before the pause (an idle zombie writes nothing, so nothing would fence it)."""
    path = eos_job(tmp_path, kafka_broker.bootstrap, timeout_s=120)
    other_host = tmp_path / "host-b" / "job"
    shutil.copytree(path.parent, other_host)
    config = h.load(path)
    meta = await h.open_meta(config)
    assert isinstance(meta, KafkaSystem)
    try:
        await h.prepare(config, meta)
        work = h.Workload(KEYS, stream=h.streams(config)[0])
        records = work.records(RECORDS)
        await h.produce(meta, records[:RECORDS // 2])

        async def producer() -> bytes | None:
            return (await meta.fences_table(config.name)).get(PRODUCER_PREFIX + b"0")

        with (tmp_path / "worker.log").open("ab") as log:
            zombie = h.start_worker(path, log)
            replacement = None
            try:
                async def started() -> bool:
                    return await checkpointed(meta, config) >= RECORDS // 10

                await h.wait_until(started, 180, "the first worker's commits", zombie)
                os.killpg(zombie.pid, signal.SIGSTOP)
                zombies = await producer()
                assert zombies is not None, "the first worker recorded no producer"
                replacement = h.start_worker(other_host / path.name, log)

                async def fenced() -> bool:
                    return await producer() != zombies

                await h.wait_until(fenced, 180, "the replacement's producer", replacement)
                await h.produce(meta, records[RECORDS // 2:])
                os.killpg(zombie.pid, signal.SIGCONT)
                deadline = asyncio.get_running_loop().time() + 120
                while zombie.poll() is None:
                    if asyncio.get_running_loop().time() > deadline:
                        os.kill(zombie.pid, signal.SIGUSR1)  # it logs where its tasks wait
                        await asyncio.sleep(2)
                        raise AssertionError("zombie kept running; its log:\n" + _tail(tmp_path))
                    await asyncio.sleep(0.1)
                log.flush()
                assert zombie.returncode == 3, (  # FencedError: its commit was refused
                    f"the zombie exited {zombie.returncode}; worker log tail:\n"
                    + _tail(tmp_path))

                async def finished() -> bool:
                    return await checkpointed(meta, config) >= RECORDS

                await h.wait_until(finished, 180, "every input committed", replacement)
                assert await h.stop(replacement) == 0
            finally:
                if zombie.poll() is None:
                    os.killpg(zombie.pid, signal.SIGCONT)
                h.kill(zombie)
                if replacement is not None:
                    h.kill(replacement)
        assert await output_records(meta, config) == RECORDS
        assert h.exact_problems(await h.outputs(meta, config), work) == []
        assert await h.changelog_state(meta, config) == work.totals
    finally:
        await meta.close()


def _tail(tmp_path: Path) -> str:
    """The last lines the workers logged, from a SIGUSR1 task dump if there is one (for
    a failure's message)."""
    text = (tmp_path / "worker.log").read_text(errors="replace")
    dump = text.rfind("SIGUSR1:")
    return text[dump:][:20_000] if dump >= 0 else text[-3000:]


async def test_a_newer_job_model_fences_a_running_worker(kafka_broker: KafkaBroker,
                                                        tmp_path: Path) -> None:
    """Publishing epoch 2 (what `sampan run` does on an expansion or a restart) bumps the
    running epoch-1 worker's producer: it exits 3 without committing again, and a worker
    of epoch 2 finishes the job exactly."""
    path = eos_job(tmp_path, kafka_broker.bootstrap)
    config = h.load(path)
    meta = await h.open_meta(config)
    try:
        model = await h.prepare(config, meta)
        work = h.Workload(KEYS, stream=h.streams(config)[0])
        await h.produce(meta, work.records(RECORDS))
        with (tmp_path / "worker.log").open("ab") as log:
            old = h.start_worker(path, log)
            new = None
            try:
                async def started() -> bool:
                    return await checkpointed(meta, config) >= RECORDS // 10

                await h.wait_until(started, 180, "the epoch-1 worker's commits", old)
                newer = build_job_model(config, {config.inputs[0]: h.PARTITIONS}, model)
                assert newer.epoch == model.epoch + 1
                await publish_model(meta, config, newer)
                assert old.wait(120) == 3
                new = h.start_worker(path, log)

                async def finished() -> bool:
                    return await checkpointed(meta, config) >= RECORDS

                await h.wait_until(finished, 180, "every input committed", new)
                assert await h.stop(new) == 0
            finally:
                h.kill(old)
                if new is not None:
                    h.kill(new)
        checkpoints = await meta.read_checkpoints(config.name)
        assert {c.epoch for c in checkpoints.values()} == {newer.epoch}
        assert await output_records(meta, config) == RECORDS
        assert h.exact_problems(await h.outputs(meta, config), work) == []
        assert await h.changelog_state(meta, config) == work.totals
    finally:
        await meta.close()
