"""Restoring stores from their changelogs: full after losing the folder, delta when behind."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from jobs import harness as h
from jobs import jobfiles as jf
from jobs import outputs as out

from framework.config import JobConfig
from framework.metadata import read_state
from framework.stores import RocksDBEngine

RECORDS = 20_000
KEYS = 1_000
TASKS = [f"Partition {p}" for p in range(jf.PARTITIONS)]


def stored_totals(config: JobConfig) -> dict[str, int]:
    """What the tasks' RocksDB folders hold (the worker must be stopped)."""
    totals: dict[str, int] = {}
    for task in TASKS:
        engine = RocksDBEngine.open(config.state_dir, "totals", task)
        try:
            totals.update({k.decode(): json.loads(v) for k, v in engine.iterate()})
        finally:
            engine.close()
    return totals


async def test_deleted_store_folder_is_restored_fully(tmp_path: Path) -> None:
    """No local state: every task restores its whole changelog partition, then compacted."""
    # A small write buffer forces commits as it fills, so keys are logged more than once
    # however fast the worker runs.
    config = jf.load(jf.write_job(tmp_path / "job", job_extra="write_buffer_max_keys = 50"))
    meta = await h.open_meta(config)
    try:
        model = await h.prepare(config, meta)
        work = out.Workload(KEYS)
        await h.produce(meta, work.records(RECORDS))
        first, _ = await h.run_worker(config, model, RECORDS)
        # A brand-new job: empty changelogs, nothing to restore.
        assert first.restore_modes == {f"{t}/totals": "none" for t in TASKS}
        assert first.restored == 0
        logged = sum((await out.changelog_ends(meta, config)).values())
        assert logged > KEYS  # several commits wrote some keys more than once

        shutil.rmtree(config.state_dir / "stores")
        worker, _ = await h.run_worker(config, model, 0)
        assert worker.restore_modes == {f"{t}/totals": "full" for t in TASKS}
        assert worker.restored == logged
        assert stored_totals(config) == work.totals
        report = (await read_state(meta, config)).workers[0]
        assert (report.restored, report.restore_modes) == (logged, worker.restore_modes)

        assert await meta.compact(config.changelog_stream("totals").partition(".")[2]) == (
            logged - KEYS)
        shutil.rmtree(config.state_dir / "stores")
        worker, _ = await h.run_worker(config, model, 0)
        assert worker.restored == KEYS  # one record per key is left after compaction
        assert stored_totals(config) == work.totals
    finally:
        await meta.close()


async def test_store_behind_its_changelog_restores_only_the_delta(tmp_path: Path) -> None:
    """Stores copied from an earlier run replay exactly the changelog records written since."""
    config = jf.load(jf.write_job(tmp_path / "job"))
    meta = await h.open_meta(config)
    try:
        model = await h.prepare(config, meta)
        work = out.Workload(KEYS)
        await h.produce(meta, work.records(RECORDS))
        await h.run_worker(config, model, RECORDS)
        before = await out.changelog_ends(meta, config)
        shutil.copytree(config.state_dir / "stores", tmp_path / "backup")

        await h.produce(meta, work.records(RECORDS))
        second, _ = await h.run_worker(config, model, RECORDS)
        assert second.restore_modes == {f"{t}/totals": "none" for t in TASKS}
        after = await out.changelog_ends(meta, config)
        shutil.rmtree(config.state_dir / "stores")
        shutil.copytree(tmp_path / "backup", config.state_dir / "stores")

        worker, _ = await h.run_worker(config, model, 0)
        assert worker.restore_modes == {f"{t}/totals": "delta" for t in TASKS}
        assert worker.restored == sum(after.values()) - sum(before.values())
        assert stored_totals(config) == work.totals
        assert await out.changelog_state(meta, config) == work.totals
    finally:
        await meta.close()
