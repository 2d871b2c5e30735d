"""The Spark verifier of this example (`sampan verify`), implementing checker.py.

Keys of the diff: ``window:<user>|<start>`` → the number of the user's page views with
``start <= ts < start + size`` (every window start a multiple of the advance, from 0 on);
``late:<partition>:<offset>`` for each record in ``late-views`` (expected: none). The
window kind comes from the task module's ``WINDOW``. Watermark records are left out; a
window emitted twice shows as wrong (``a | b``).
"""

from __future__ import annotations

import sys

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from framework.api import load_task_class
from framework.config import JobConfig
from framework.spark.errors import VerificationError
from framework.spark.verify import Verifier, read_stream

__all__ = ["VERIFIERS", "verify_windowed_counts"]


def _field(name: str) -> Column:
    return F.get_json_object("value", f"$.{name}")


def _window(config: JobConfig) -> tuple[int, int]:
    """(size_ms, advance_ms) of the task module's ``WINDOW``."""
    task = load_task_class(config)
    window = getattr(sys.modules[task.__module__], "WINDOW", None)
    if window is None or not hasattr(window, "advance_ms"):
        raise VerificationError(
            f"{config.task!r} has no hopping or tumbling WINDOW in its module; the "
            f"windowed-counts verifier reads the windows from there")
    return int(window.size_ms), int(window.advance_ms)


def verify_windowed_counts(spark: SparkSession, config: JobConfig) -> DataFrame:
    """``key, expected, output`` for every (user, window) and every late record."""
    [views_stream] = config.inputs
    system = config.stream(views_stream).system
    size, advance = _window(config)
    views = (read_stream(spark, config, views_stream).where(_field("watermark").isNull())
             .select(_field("user").alias("user"), _field("ts").cast("long").alias("ts")))
    first = F.greatest(F.lit(0), F.col("ts") - size + 1)
    first = first + F.pmod(-first, F.lit(advance))
    last = F.col("ts") - F.pmod(F.col("ts"), F.lit(advance))
    expected = (views.where(first <= last)
                .select("user", F.explode(F.sequence(first, last, F.lit(advance)))
                        .alias("start"))
                .groupBy("user", "start").agg(F.count("*").cast("string").alias("expected"))
                .select(F.concat(F.lit("window:"), "user", F.lit("|"),
                                 F.col("start").cast("string")).alias("key"), "expected"))
    emitted = read_stream(spark, config, f"{system}.views-per-user").select(
        F.concat(F.lit("window:"), _field("user"), F.lit("|"), _field("start")).alias("key"),
        F.when(_field("end").cast("long") == _field("start").cast("long") + size,
               _field("views")).otherwise(F.concat(F.lit("end "), _field("end")))
        .alias("value"))
    output = emitted.groupBy("key").agg(
        F.concat_ws(" | ", F.sort_array(F.collect_list("value"))).alias("output"))
    late = read_stream(spark, config, f"{system}.late-views").select(
        F.concat(F.lit("late:"), F.col("partition").cast("string"), F.lit(":"),
                 F.col("offset").cast("string")).alias("key"),
        F.lit("late").alias("output"))
    return expected.join(output.unionByName(late), "key", "full_outer")


VERIFIERS = {"WindowedCountsTask": Verifier(verify_windowed_counts, ("output",))}
"""Task class name → its verifier: what `framework.spark.verify` looks up."""
