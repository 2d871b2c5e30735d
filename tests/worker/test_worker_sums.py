"""The per-key sum job on the local log: exact, and exactly-once through five SIGKILLs."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from jobs import harness as h
from jobs import jobfiles as jf
from jobs import outputs as out

RECORDS = 100_000
KEYS = 1_000


async def test_sums_are_exact_over_100k_records(tmp_path: Path) -> None:
    """One worker, no crash: every key's store value and running-sum outputs are exact."""
    config = jf.load(jf.write_job(tmp_path / "job"))
    meta = await h.open_meta(config)
    try:
        model = await h.prepare(config, meta)
        work = out.Workload(KEYS)
        await h.produce(meta, work.records(RECORDS))
        _, result = await h.run_worker(config, model, RECORDS)
        assert (result.processed, result.skipped, result.reason) == (RECORDS, 0, "stopped")
        assert len(work.totals) == KEYS
        assert await out.changelog_state(meta, config) == work.totals
        assert await out.output_count(meta, config) == RECORDS
        assert out.exact_problems(await out.outputs(meta, config), work) == []
    finally:
        await meta.close()


async def test_five_sigkills_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    """`sampan worker` SIGKILLed at five random points and restarted: still exactly once.

    Each input record yields exactly one output (count == inputs), every key's outputs
    are its running sums in order, and the store's changelog holds the true totals.
    """
    path = jf.write_job(tmp_path / "job")
    config = jf.load(path)
    meta = await h.open_meta(config)
    rng = random.Random(2026)
    kill_points = [step * RECORDS // 8 + rng.randrange(-3_000, 3_000) for step in range(1, 6)]
    try:
        await h.prepare(config, meta)
        work = out.Workload(KEYS)
        records = work.records(RECORDS)
        produced = 0
        killed = []
        with (tmp_path / "worker.log").open("ab") as log:
            for point in kill_points:
                # Input only up to 25k past the kill point, the rest after the last kill:
                # however fast the worker, every kill lands before the job's end.
                ahead = min(RECORDS, point + 25_000)
                await h.produce(meta, records[produced:ahead])
                produced = ahead
                worker = h.start_worker(path, log)
                try:
                    async def reached(target: int = point) -> bool:
                        return await out.output_count(meta, config) >= target

                    await h.wait_until(reached, 60, f"{point} outputs", worker)
                    await asyncio.sleep(rng.uniform(0, 0.05))  # land anywhere in a commit cycle
                finally:
                    h.kill(worker)
                killed.append(worker.returncode)
                assert await out.output_count(meta, config) < RECORDS, "killed after the end"
            await h.produce(meta, records[produced:])
            worker = h.start_worker(path, log)
            try:
                async def finished() -> bool:
                    return await out.output_count(meta, config) >= RECORDS

                await h.wait_until(finished, 60, "all outputs", worker)
                assert await h.stop(worker) == 0  # SIGTERM: commit and exit cleanly
            finally:
                h.kill(worker)
        assert killed == [-9] * 5
        assert await out.output_count(meta, config) == RECORDS
        assert out.exact_problems(await out.outputs(meta, config), work) == []
        assert await out.changelog_state(meta, config) == work.totals
        checkpoints = await meta.read_checkpoints(config.name)
        assert sum(sum(c.inputs.values()) for c in checkpoints.values()) == RECORDS
    finally:
        await meta.close()
