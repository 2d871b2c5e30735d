"""`sampan drill --verify spark`: the drill's result re-derived in Spark, an independent check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from framework.drill.options import DrillOptions
from framework.drill.run import run_drill


async def test_drill_verified_in_spark_is_exact(spark: Any, tmp_path: Path) -> None:
    report = await run_drill(DrillOptions(records=3000, keys=150, rate=3000, steps=(4,),
                                          output=tmp_path / "d", plot=False, verify="spark",
                                          spark=spark))
    assert report.verdict.exact
    assert report.spark is not None and report.spark.exact, report.spark.text()
    assert (report.spark.matched, report.spark.missing, report.spark.extra,
            report.spark.wrong) == (150, 0, 0, 0)
    assert report.exact
    assert "spark verification: job wordcount (verify_wordcount): EXACT — matched 150" in (
        report.text())


async def test_a_naive_drill_fails_the_spark_check_too(spark: Any, tmp_path: Path) -> None:
    report = await run_drill(DrillOptions(records=3000, keys=150, rate=3000, steps=(4,),
                                          naive=True, output=tmp_path / "n", plot=False,
                                          verify="spark", spark=spark))
    assert not report.verdict.exact
    assert report.spark is not None and not report.spark.exact
    assert report.spark.wrong > 0
    assert not report.exact
