"""A worker's start reads each stream's offsets once, however many tasks it runs: its
tasks share one read of their changelog's offsets (the restore end) and one of their
input's (where reading starts) — on Kafka each read is several round trips, paid once
per task before (`framework.worker.start_offsets`).

Real local log, real RocksDB stores, an in-process worker of four tasks; the run is
still exact.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from jobs import harness as h
from jobs import jobfiles as jf
from jobs import outputs as out

from framework.systems.base import OffsetRange
from framework.systems.local.system import LocalSystem

RECORDS = 4_000
KEYS = 100


async def test_a_worker_start_reads_each_streams_offsets_once_for_all_its_tasks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No metrics: their lag reader reads the inputs' offsets every second once running.
    config = jf.load(jf.write_job(tmp_path / "job", errors="[metrics]\nenabled = false\n"))
    meta = await h.open_meta(config)
    try:
        model = await h.prepare(config, meta)
        assert len(model.tasks_of(0)) == jf.PARTITIONS
        work = out.Workload(KEYS)
        await h.produce(meta, work.records(RECORDS))
        reads: Counter[str] = Counter()
        offsets = LocalSystem.offsets

        async def counted(self: LocalSystem, stream: str) -> dict[int, OffsetRange]:
            reads[stream] += 1
            return await offsets(self, stream)

        monkeypatch.setattr(LocalSystem, "offsets", counted)
        _, result = await h.run_worker(config, model, RECORDS)
        monkeypatch.undo()

        assert dict(reads) == {"events": 1, config.changelog_ref("totals").stream: 1}
        assert (result.processed, result.skipped, result.reason) == (RECORDS, 0, "stopped")
        assert await out.changelog_state(meta, config) == work.totals
        assert out.exact_problems(await out.outputs(meta, config), work) == []
    finally:
        await meta.close()
