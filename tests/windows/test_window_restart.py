"""Windows survive a crash mid-window: `sampan run` SIGKILLed with windows open, the
RocksDB folders deleted, and the state restored from the changelog — every window is
still emitted exactly once with its exact count."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

from jobs.windowed import MINUTE, WindowJob, view, watermark_round

USERS = [f"user-{n:03d}" for n in range(40)]


def views(rng: random.Random, start: int, end: int, count: int) -> list:
    return [view(rng.choice(USERS), rng.randrange(start, end)) for _ in range(count)]


async def test_restart_mid_window_restores_window_state_from_the_changelog(
        tmp_path: Path) -> None:
    rng = random.Random(11)
    job = WindowJob(tmp_path / "job", workers=1, partitions=2)
    await job.create_page_streams()
    # Views in minutes 0-7, watermark at minute 6: the windows [0, 5) and [1, 6) have
    # closed, those starting at minutes 2..6 are open when the job dies.
    await job.produce(views(rng, 0, 7 * MINUTE, 400) + watermark_round(6 * MINUTE, 2))
    job.start()
    try:
        await job.wait(job.caught_up, "the first batch committed")
        closed = {(w["user"], w["start"]) for w in await job.emitted()}
        assert closed == {key for key in job.expected() if key[1] + 5 * MINUTE <= 6 * MINUTE}
        assert await job.open_windows()  # windows are open: the crash is mid-window
        job.kill()
        shutil.rmtree(job.stores_dir())  # lose every RocksDB folder

        await job.produce(views(rng, 6 * MINUTE, 12 * MINUTE, 400)
                          + watermark_round(10**15, 2))
        job.start()
        await job.wait(job.caught_up, "the second batch committed")
        state = await job.state()
        report = state.workers[0]
        assert report.restore_modes == {"Partition 0/views": "full",
                                           "Partition 1/views": "full"}
        assert report.restored > 0
        assert await job.stop() == 0
    finally:
        job.kill()
    assert await job.problems() == []
    assert await job.late() == 0
    assert await job.open_windows() == []
    assert len(await job.emitted()) == len(job.expected())
