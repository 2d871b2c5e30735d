"""Exactly-once on real Apache Kafka through crashes: SIGKILLed workers and coordinator, a
SIGSTOPped zombie, a newer job model fencing a running worker."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
from pathlib import Path

import pytest
from eos_jobs import eos_job, output_records
from jobs import harness as h
from jobs import jobfiles as jf
from jobs import outputs as out
from jobs.outputs import checkpointed, exact_outputs
from jobs.runs import SumRun
from kafka_broker import KafkaBroker

from framework.coordinator.builder import build_job_model
from framework.metadata import publish_model, read_state
from framework.systems.kafka.system import KafkaSystem
from framework.systems.kafka.txn import PRODUCER_PREFIX

RECORDS = 100_000
FENCING_RECORDS = 20_000
KEYS = 1_000


@pytest.mark.timeout(900)
async def test_five_worker_and_one_coordinator_sigkills_lose_and_duplicate_nothing(
        kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    """`sampan run` with 2 workers over 100k records: at six random points a random
    worker — and once the coordinator — is SIGKILLed (the coordinator's workers get
    SIGTERM from the kernel; `sampan run` is started again). Every output record is
    checked: one per input record, each key's running sums in order, none for a key
    never produced, and the store's changelog holds the true totals."""
    run = SumRun(tmp_path / "job", kafka_broker.bootstrap,
                 coordinator="max_worker_restarts = 20\nlease_timeout_ms = 6000\n")
    config = run.config
    rng = random.Random(2026)
    points = sorted(step * RECORDS // 8 + rng.randrange(-3_000, 3_000) for step in range(1, 7))
    coordinator_at = rng.randrange(len(points))
    meta = await h.open_meta(config)
    killed: list[str] = []
    try:
        work = out.Workload(KEYS, stream=jf.streams(config)[0])
        records = work.records(RECORDS)
        run.start()

        async def healthy() -> bool:
            return run.status()[0] == 0
        await run.wait(healthy, "a healthy job", 180)
        produced = 0
        for index, point in enumerate(points):
            # Input only up to 25k past the kill point, the rest after the last kill:
            # however fast the job, every kill lands before its end (mid commit, mid
            # batch, or waiting for more input).
            ahead = min(RECORDS, point + 25_000)
            await h.produce(meta, records[produced:ahead])
            produced = ahead

            async def reached(target: int = point) -> bool:
                """``target`` inputs committed, and every worker process running now has
                reported its tasks running (a kill lands in processing, not in a start)."""
                if await checkpointed(meta, config) < target:
                    return False
                pids = run.worker_pids()
                reports = (await read_state(meta, config)).workers
                return len(pids) == config.workers and all(
                    w in reports and reports[w].pid == pid and reports[w].resumed_ms
                    for w, pid in pids.items())
            await run.wait(reached, f"{point} inputs committed", 300)
            await asyncio.sleep(rng.uniform(0, 0.1))  # land anywhere in a commit
            if index == coordinator_at:
                run.kill_coordinator()
                killed.append("coordinator")
                run.start()
            else:
                worker, pid = rng.choice(sorted(run.worker_pids().items()))
                os.kill(pid, signal.SIGKILL)
                killed.append(f"worker {worker}")
            assert await checkpointed(meta, config) < RECORDS, "killed after the end"
        await h.produce(meta, records[produced:])

        async def finished() -> bool:
            return await checkpointed(meta, config) >= RECORDS
        await run.wait(finished, "every input committed", 300)
        assert await run.stop() == 0
        assert await checkpointed(meta, config) == RECORDS
        assert await output_records(meta, config) == RECORDS
        assert await exact_outputs(meta, config, work) == []
    finally:
        run.kill()
        await meta.close()
    assert len(killed) == 6 and killed.count("coordinator") == 1
    assert "Traceback" not in run.logs_text(tail=10**7)


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
    config = jf.load(path)
    meta = await h.open_meta(config)
    assert isinstance(meta, KafkaSystem)
    try:
        await h.prepare(config, meta)
        work = out.Workload(KEYS, stream=jf.streams(config)[0])
        records = work.records(FENCING_RECORDS)
        await h.produce(meta, records[:FENCING_RECORDS // 2])

        async def producer() -> bytes | None:
            return (await meta.fences_table(config.name)).get(PRODUCER_PREFIX + b"0")

        with (tmp_path / "worker.log").open("ab") as log:
            zombie = h.start_worker(path, log)
            replacement = None
            try:
                async def started() -> bool:
                    return await checkpointed(meta, config) >= FENCING_RECORDS // 10

                await h.wait_until(started, 180, "the first worker's commits", zombie)
                os.killpg(zombie.pid, signal.SIGSTOP)
                zombies = await producer()
                assert zombies is not None, "the first worker recorded no producer"
                replacement = h.start_worker(other_host / path.name, log)

                async def fenced() -> bool:
                    return await producer() != zombies

                await h.wait_until(fenced, 180, "the replacement's producer", replacement)
                await h.produce(meta, records[FENCING_RECORDS // 2:])
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
                    return await checkpointed(meta, config) >= FENCING_RECORDS

                await h.wait_until(finished, 180, "every input committed", replacement)
                assert await h.stop(replacement) == 0
            finally:
                if zombie.poll() is None:
                    os.killpg(zombie.pid, signal.SIGCONT)
                h.kill(zombie)
                if replacement is not None:
                    h.kill(replacement)
        assert await output_records(meta, config) == FENCING_RECORDS
        assert out.exact_problems(await out.outputs(meta, config), work) == []
        assert await out.changelog_state(meta, config) == work.totals
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
    of epoch 2 finishes the job exactly. Half the input is written only after the fence,
    so the epoch-2 worker has records of its own to commit however fast epoch 1 was (when
    all of it was written first, epoch 1 could commit everything before its fence, and the
    test stopped the new worker while it was still starting)."""
    path = eos_job(tmp_path, kafka_broker.bootstrap)
    config = jf.load(path)
    meta = await h.open_meta(config)
    try:
        model = await h.prepare(config, meta)
        work = out.Workload(KEYS, stream=jf.streams(config)[0])
        await h.produce(meta, work.records(FENCING_RECORDS // 2))
        with (tmp_path / "worker.log").open("ab") as log:
            old = h.start_worker(path, log)
            new = None
            try:
                async def started() -> bool:
                    return await checkpointed(meta, config) >= FENCING_RECORDS // 10

                await h.wait_until(started, 180, "the epoch-1 worker's commits", old)
                newer = build_job_model(config, {config.inputs[0]: jf.PARTITIONS}, model)
                assert newer.epoch == model.epoch + 1
                await publish_model(meta, config, newer)
                assert old.wait(120) == 3
                await h.produce(meta, work.records(FENCING_RECORDS - FENCING_RECORDS // 2))
                new = h.start_worker(path, log)

                async def finished() -> bool:
                    checkpoints = await meta.read_checkpoints(config.name)
                    return ({c.epoch for c in checkpoints.values()} == {newer.epoch}
                            and await checkpointed(meta, config) >= FENCING_RECORDS)

                await h.wait_until(finished, 180, "every input committed", new)
                assert await h.stop(new) == 0
            finally:
                h.kill(old)
                if new is not None:
                    h.kill(new)
        checkpoints = await meta.read_checkpoints(config.name)
        assert {c.epoch for c in checkpoints.values()} == {newer.epoch}
        assert await output_records(meta, config) == FENCING_RECORDS
        assert out.exact_problems(await out.outputs(meta, config), work) == []
        assert await out.changelog_state(meta, config) == work.totals
    finally:
        await meta.close()
