"""The Spark verifier of examples/windowed_counts: it recomputes every window from the
page views (its truth is the example's checker) and diffs the emitted windows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jobs.windowed import MINUTE, WindowJob, view, watermark_round

from framework.drill.options import DrillOptions
from framework.drill.run import run_drill
from framework.spark.verify import verify_job
from framework.systems.base import ProducerRecord


def window(user: str, start: int, views: int, end: int | None = None) -> ProducerRecord:
    value = {"user": user, "start": start, "end": end or start + 5 * MINUTE, "views": views}
    return ProducerRecord("views-per-user", user.encode(), json.dumps(value).encode())


async def test_verifier_finds_wrong_duplicate_missing_extra_and_late_windows(
        spark: Any, tmp_path: Path) -> None:
    job = WindowJob(tmp_path / "job", workers=1, partitions=2)
    await job.create_page_streams()
    await job.produce([view("u", 0), view("u", MINUTE), view("v", 4 * MINUTE),
                       *watermark_round(10**15, 2)])
    assert job.expected() == {("u", 0): 2, ("u", MINUTE): 1, ("v", 0): 1, ("v", MINUTE): 1,
                              ("v", 2 * MINUTE): 1, ("v", 3 * MINUTE): 1,
                              ("v", 4 * MINUTE): 1}
    emitted = [window("u", 0, 2), window("u", MINUTE, 2),           # right, wrong count
               window("v", 0, 1), window("v", 0, 1),                # emitted twice
               window("v", MINUTE, 1, end=MINUTE + 1),              # wrong end
               window("v", 2 * MINUTE, 1), window("v", 3 * MINUTE, 1),
               window("w", 0, 1)]                                   # no such views
    late = ProducerRecord("late-views", b"u", json.dumps({"ts": 1}).encode())
    await job.call(lambda s: s.produce([*emitted, late]))            # v at 4 min: missing
    report = verify_job(job.path, spark)
    assert (report.matched, report.missing, report.extra, report.wrong) == (3, 1, 2, 3), (
        report.text())
    assert report.examples["wrong"][0].startswith("window:u|60000: expected 1, output 2")


async def test_drill_verified_in_spark_is_exact(spark: Any, tmp_path: Path) -> None:
    report = await run_drill(DrillOptions(example="windowed_counts", records=3000, rate=1500,
                                          output=tmp_path / "d", plot=False, verify="spark",
                                          spark=spark))
    assert report.verdict.exact, "\n".join(report.verdict.describe())
    assert report.spark is not None and report.spark.exact, report.spark.text()
    assert (report.spark.matched, report.spark.missing, report.spark.extra,
            report.spark.wrong) == (5693, 0, 0, 0)
