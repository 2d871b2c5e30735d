"""A commit due while the previous one is still being written (Kafka acknowledges it over
the network) waits for it without holding the worker's loop: the tasks go on processing
and the next commit is prepared once the previous landed — not by awaiting it inside the
loop. Only a stop or a full store write buffer waits for it there. Every output checked."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from jobs import harness as h
from jobs import outputs as out

from framework.worker.commit import Committer, PreparedCommit
from framework.worker.runner import Worker

pytestmark = pytest.mark.slow

WRITE_S = 0.5
"""How long each commit takes to be written here (the job commits every 100 ms)."""


async def test_a_commit_in_flight_does_not_hold_the_loop(
        tmp_path: Path, kafka_broker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    started_in_flight: list[int] = []  # commits started while one was being written
    writing = Committer.write
    starting = Committer.start

    async def slow_write(self: Committer, commit: PreparedCommit) -> None:
        await asyncio.sleep(WRITE_S)
        await writing(self, commit)

    async def start(self: Committer, instances: Any) -> None:
        if self.in_flight and not worker.stop.is_set():
            started_in_flight.append(self.prepared + 1)
        await starting(self, instances)

    monkeypatch.setattr(Committer, "write", slow_write)
    monkeypatch.setattr(Committer, "start", start)
    config, meta, work = await h.stamped_job(tmp_path / "job", "in-flight", "kafka",
                                             kafka_broker.bootstrap)
    try:
        await h.prepare(config, meta)
        worker = Worker(config, 0)
        async with h.FedWorker(worker, meta, work) as fed:
            await h.wait_until(h.processed(worker, 1000), 60, "records flowing")
            await fed.drain()
        result = await fed.result()
        assert result.commits >= 3  # several commits, each in flight for WRITE_S
        assert started_in_flight == []
        assert out.replay_problems(await out.outputs(meta, config), work) == []
    finally:
        await meta.close()
