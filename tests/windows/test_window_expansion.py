"""Windows stay exact while their input expands mid-window: `sampan run` with 2 workers,
``page-views`` 2 → 4 with windows open and views of the same users landing in the new
partitions — no window closes before the new partitions were read, none is emitted twice,
every count is exact."""

from __future__ import annotations

import random
from pathlib import Path

from jobs.windowed import MINUTE, WindowJob, view, watermark_round

from framework.partitioner import partition_for_key

USERS = [f"user-{n:03d}" for n in range(60)]


async def test_expansion_mid_window_neither_closes_early_nor_double_counts(
        tmp_path: Path) -> None:
    rng = random.Random(5)
    job = WindowJob(tmp_path / "job", workers=2, partitions=2)
    await job.create_page_streams()
    await job.produce([view(rng.choice(USERS), rng.randrange(0, 4 * MINUTE))
                       for _ in range(300)] + watermark_round(3 * MINUTE, 4))
    job.start()
    try:
        await job.wait_epoch(1, workers=2)
        await job.wait(job.caught_up, "the first batch committed")
        assert await job.emitted() == []  # every window is still open
        await job.expand(4)
        # Lands in the new partitions too (before the job even saw the expansion), for
        # windows that are still open; then the watermark rounds that close them.
        moved = [view(user, rng.randrange(3 * MINUTE, 8 * MINUTE))
                 for user in USERS for _ in range(3)]
        assert {partition_for_key(v.key, 4) for v in moved if v.key} == {0, 1, 2, 3}
        await job.produce(moved + watermark_round(6 * MINUTE, 4))
        state = await job.wait_epoch(2, workers=2)
        assert [e.change for e in state.status.expansions] == ["local.page-views 2→4"]
        await job.produce(watermark_round(10**15, 4))
        await job.wait(job.caught_up, "everything committed")
        assert await job.stop() == 0
    finally:
        job.kill()
    assert await job.problems() == []
    assert await job.late() == 0
    assert await job.open_windows() == []
    assert len(await job.emitted()) == len(job.expected())
