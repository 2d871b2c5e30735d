"""`Replicas.stop` ends the standby/warmup tailer even when a read inside it swallows the
cancel (as Python 3.11's ``asyncio.wait_for`` does when its inner await completes just as
the cancel arrives): the rebalance that stops it must never wait forever (the stuck
rebalance of issue 13)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from hostjobs import job_file

from framework.config import load_config
from framework.hosts.config import host_config
from framework.hosts.replicas import Replicas
from framework.metadata.jobmodel import TaskModel


class _SwallowingReplicas(Replicas):
    """A tailer whose read absorbs the cancel once, then keeps tailing (the bug's shape)."""

    rounds = 0
    swallowed = 0

    async def _catch_up(self) -> None:
        self.rounds += 1
        try:
            await asyncio.sleep(0.2)  # a changelog read in flight
        except asyncio.CancelledError:
            self.swallowed += 1  # completed as the cancel arrived: the result wins


def test_stop_ends_a_tailer_that_swallowed_the_cancel(tmp_path: Path) -> None:
    config = host_config(load_config(job_file(tmp_path / "job", "127.0.0.1:9", "rs")),
                         tmp_path / "data")
    task = TaskModel("Partition 0", frozenset(), changelog_partition=0, worker=0)

    async def scenario() -> tuple[int, int, bool, Any]:
        replicas = _SwallowingReplicas(config, None, {"Partition 0": task},  # type: ignore[arg-type]
                                       interval_s=0.01)
        replicas.start()
        while replicas.rounds < 2:
            await asyncio.sleep(0.01)
        runner = replicas._runner
        await replicas.stop(recancel_s=0.05)
        assert runner is not None
        return replicas.rounds, replicas.swallowed, runner.done(), replicas._engines

    rounds, swallowed, done, engines = asyncio.run(scenario())
    assert rounds >= 2 and swallowed >= 1  # the first cancel was lost, as in the stuck rebalance
    assert done and engines == {}  # yet the tailer ended and the copies were closed
