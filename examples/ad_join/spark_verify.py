"""The Spark verifier of this example (`sampan verify`), implementing checker.py (the spec).

Keys of the diff: ``click:<click_id>`` → ``attributed <campaign> <impression_ts>`` or
``late``; ``ctr:<campaign>`` → ``impressions=<n> clicks=<m>`` (the sum over tasks of each
task's last ``ctr`` output). Watermark records are left out; duplicate clicks are one.
A click emitted twice shows as wrong (``a | b``).
"""

from __future__ import annotations

import sys

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from framework.api import load_task_class
from framework.config import JobConfig
from framework.spark.verify import Verifier, read_stream

__all__ = ["VERIFIERS", "verify_ad_join"]


def _field(name: str) -> Column:
    return F.get_json_object("value", f"$.{name}")


def _data(frame: DataFrame) -> DataFrame:
    return frame.where(_field("watermark").isNull())


def _window_ms(config: JobConfig) -> int:
    task = load_task_class(config)
    return int(sys.modules[task.__module__].JOIN_WINDOW_MS)


def verify_ad_join(spark: SparkSession, config: JobConfig) -> DataFrame:
    """``key, expected, output`` for every click and campaign."""
    impressions_stream, clicks_stream = config.inputs
    system = config.stream(clicks_stream).system
    window = _window_ms(config)
    impressions = _data(read_stream(spark, config, impressions_stream)).select(
        _field("auction").alias("auction"), _field("campaign").alias("campaign"),
        _field("ts").cast("long").alias("imp_ts"))
    clicks = (_data(read_stream(spark, config, clicks_stream))
              .select(_field("click_id").alias("click_id"), _field("auction").alias("auction"),
                      _field("ts").cast("long").alias("ts"))
              .groupBy("click_id").agg(F.first("auction").alias("auction"),
                                       F.first("ts").alias("ts")))
    joined = clicks.join(impressions, "auction", "left")
    attributed = (F.col("imp_ts").isNotNull() & (F.col("imp_ts") <= F.col("ts"))
                  & (F.col("ts") <= F.col("imp_ts") + window))
    expected_clicks = joined.select(
        F.concat(F.lit("click:"), "click_id").alias("key"),
        F.when(attributed, F.concat_ws(" ", F.lit("attributed"), "campaign", "imp_ts"))
        .otherwise(F.lit("late")).alias("expected"))
    campaigns = (expected_clicks.join(joined.select(
        F.concat(F.lit("click:"), "click_id").alias("key"), "campaign"), "key")
        .where(F.col("expected") != "late").groupBy("campaign").agg(F.count("*").alias("clicks")))
    expected_ctr = (impressions.groupBy("campaign").agg(F.count("*").alias("impressions"))
                    .join(campaigns, "campaign", "left").select(
                        F.concat(F.lit("ctr:"), "campaign").alias("key"),
                        F.format_string("impressions=%d clicks=%d", "impressions",
                                        F.coalesce("clicks", F.lit(0))).alias("expected")))
    emitted = read_stream(spark, config, f"{system}.attributed-clicks").select(
        F.concat(F.lit("click:"), _field("click_id")).alias("key"),
        F.concat_ws(" ", F.lit("attributed"), _field("campaign"), _field("impression_ts"))
        .alias("value"), "partition", "offset")
    late = read_stream(spark, config, f"{system}.late").select(
        F.concat(F.lit("click:"), _field("click_id")).alias("key"), F.lit("late").alias("value"),
        "partition", "offset")
    output_clicks = emitted.unionByName(late).groupBy("key").agg(
        F.concat_ws(" | ", F.sort_array(F.collect_list("value"))).alias("output"))
    last_ctr = (read_stream(spark, config, f"{system}.ctr").groupBy("key")
                .agg(F.max_by("value", "offset").alias("value"))
                .groupBy(F.get_json_object("value", "$.campaign").alias("campaign"))
                .agg(F.sum(_field("impressions").cast("long")).alias("impressions"),
                     F.sum(_field("clicks").cast("long")).alias("clicks")))
    output_ctr = last_ctr.select(
        F.concat(F.lit("ctr:"), "campaign").alias("key"),
        F.format_string("impressions=%d clicks=%d", "impressions", "clicks").alias("output"))
    expected = expected_clicks.unionByName(expected_ctr)
    return expected.join(output_clicks.unionByName(output_ctr), "key", "full_outer")


VERIFIERS = {"AdJoinTask": Verifier(verify_ad_join, ("output",))}
"""Task class name → its verifier: what `framework.spark.verify` looks up."""
