"""Expansion pause and restore time against state size (keys in the job's store).

- pause: `sampan run` (local log, 2 workers) of the sum job on 2 partitions over one
  record per key, caught up; the input grows 2 → 4; the figure is the coordinator's
  `ExpansionRecord.pause_ms` (detection → every worker resumed on the new epoch);
- restore: a changelog partition holding the keys restored into a fresh RocksDB store
  (`restore_store` through `changelog_reader`, what a worker does when it has no store).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from bench.curves.job import ROOT, open_meta, prepare, records, write_job
from bench.curves.plot import Curve
from framework.coordinator.supervisor import die_with_parent
from framework.drill.timeline import committed_and_end
from framework.metadata import read_state
from framework.stores import RocksDBEngine, changelog_reader, restore_store
from framework.systems.base import ProducerRecord
from framework.systems.local.system import LocalSystem
from groupers import SystemStreamPartition

QUICK = (10_000, 100_000)
FULL = (10_000, 1_000_000, 10_000_000)
BATCH = 10_000
T = TypeVar("T")


async def _wait(what: str, check: Callable[[], Awaitable[T | None]],
                process: subprocess.Popen[bytes], timeout: float) -> T:
    """``check()``'s first answer that is not None, polled until ``timeout`` or until
    ``process`` exits."""
    deadline = time.monotonic() + timeout
    while True:
        found = await check()
        if found is not None:
            return found
        if process.poll() is not None:
            raise RuntimeError(f"sampan run exited with {process.returncode} before {what}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {what} after {timeout} s")
        await asyncio.sleep(0.2)


async def pause(folder: Path, keys: int) -> float:
    """Seconds of the expansion pause of a job whose store holds ``keys`` keys."""
    config = write_job(folder, name="pause", partitions=2, workers=2,
                       extra="commit_interval_ms = 500\n\n[coordinator]\n"
                             "monitor_interval_ms = 300\n")
    await prepare(config, 2, records(config, keys, keys))
    with (folder / "run.log").open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "framework.cli", "run", str(config.path)], stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            preexec_fn=die_with_parent)  # SIGTERM if the bench dies
    system = await open_meta(config)
    try:
        async def caught_up() -> bool | None:
            committed, end = await committed_and_end(system, config)
            return True if committed >= end == keys else None

        await _wait("catch-up", caught_up, process, 3600)
        epoch = (await read_state(system, config)).model.epoch  # type: ignore[union-attr]
        await system.expand_stream(config.inputs[0].partition(".")[2], 4)

        async def resumed() -> int | None:
            done = [e.pause_ms for e in (await read_state(system, config)).status.expansions
                    if e.epoch > epoch and e.pause_ms is not None]
            return done[0] if done else None

        return await _wait("expansion resumed", resumed, process, 600) / 1000
    finally:
        await system.close()
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(120)


async def restore(folder: Path, keys: int) -> float:
    """Seconds to restore a fresh RocksDB store from a changelog of ``keys`` keys."""
    system = LocalSystem("local", folder / "log")
    await system.start()
    try:
        await system.create_stream("changelog", 1, compacted=True)
        for at in range(0, keys, 50_000):
            await system.produce([ProducerRecord("changelog", b"key-%08d" % k, b"%d" % k,
                                                 partition=0)
                                  for k in range(at, min(at + 50_000, keys))])
        engine = RocksDBEngine(folder / "store", store="curves", task="Partition 0")
        ssp = SystemStreamPartition("local", "changelog", 0)
        try:
            started = time.perf_counter()
            result = await restore_store(
                engine, changelog=("changelog", 0),
                fetch=changelog_reader(system, ssp, keys, batch_size=BATCH), end=keys,
                oldest=0, batch_size=BATCH, progress=None)
            elapsed = time.perf_counter() - started
        finally:
            engine.close()
    finally:
        await system.close()
    assert result.records == keys, result
    return elapsed


def measure(work: Path, sizes: tuple[int, ...]) -> list[Curve]:
    took = Curve("restore; expansion 2 → 4 (local log, 2 workers)", "keys in the store",
                 "seconds", log_x=True)
    rates = Curve("restore rate", "keys in the store", "keys/s", log_x=True)
    for keys in sizes:
        folder = work / f"k{keys}"
        seconds = asyncio.run(restore(folder / "restore", keys))
        took.add("restore of one store", keys, seconds)
        rates.add("restore", keys, keys / seconds)
        print(f"  {keys:>10,} keys: restore {seconds:7.2f} s ({keys / seconds:,.0f} keys/s)",
              flush=True)
        paused = asyncio.run(pause(folder / "pause", keys))
        took.add("expansion pause", keys, paused)
        print(f"  {keys:>10,} keys: expansion pause {paused:6.2f} s", flush=True)
    return [took, rates]
