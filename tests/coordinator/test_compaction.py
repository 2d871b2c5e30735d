"""The coordinator compacts the job's changelogs and coordinator stream in the background."""

from __future__ import annotations

import shutil
from collections.abc import Callable

from jobs.outputs import keys
from jobs.runs import CountJob

from framework.config import load_config
from framework.drill.verify import read_stream
from framework.systems.base import System


async def kept_records(system: System, stream: str) -> int:
    return sum(len(rows) for rows in (await read_stream(system, stream)).values())


async def test_changelogs_stay_bounded_while_the_job_runs_and_results_stay_exact(
        make_job: Callable[..., CountJob]) -> None:
    """20 keys updated 40 times each, commits every 100 ms: the compactor leaves one record
    per key in the changelog, results stay exact, and a full restore from it is exact."""
    job = make_job("compacting", {"words": 2})
    job.path.write_text(job.path.read_text().replace(
        "[coordinator]", "[coordinator]\ncompaction_interval_ms = 300"))
    job.config = load_config(job.path)
    await job.create("words", 2)
    job.start()
    await job.wait_epoch(1)
    changelog = job.config.changelog_stream("counts").partition(".")[2]
    for _ in range(8):
        await job.produce("words", keys(20), 5)
        await job.wait_outputs()

    async def compacted() -> bool:
        written = sum(r.end for r in (await job.call(lambda s: s.offsets(changelog))).values())
        return await job.call(lambda s: kept_records(s, changelog)) <= 20 < written
    await job.wait(compacted, "the changelog compacted to one record per key")
    assert f"compacted {changelog}: dropped " in job.coordinator_log()
    assert await job.stop() == 0
    await job.assert_exact()

    shutil.rmtree(job.config.state_dir / "stores")  # a full restore from the compacted log
    await job.produce("words", keys(20), 1)
    job.start()
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()
