"""The Spark verifier of this example (`sampan verify`), implementing checker.py (the spec).

Keys of the diff: ``view:<view_id>`` → ``profile <ts>`` (the user's profile version with
the greatest ``ts`` strictly before the view's) or ``profile none``; ``order:<user>`` →
the user's view ids in ``(ts, view_id)`` order, against the order of ``enriched-views``.
Watermark records are left out. A view emitted twice shows as wrong (``a | b``).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from framework.config import JobConfig
from framework.spark.verify import Verifier, read_stream

__all__ = ["VERIFIERS", "verify_enrichment"]


def _field(name: str) -> Column:
    return F.get_json_object("value", f"$.{name}")


def _ordered_ids(order: str) -> Column:
    """The view ids of a group, sorted by the ``order`` struct's fields."""
    return F.array_join(F.transform(F.sort_array(F.collect_list(F.struct(
        *order.split(","), "view_id"))), lambda s: s["view_id"]), ",")


def verify_enrichment(spark: SparkSession, config: JobConfig) -> DataFrame:
    """``key, expected, output`` for every view and user."""
    streams = {q.partition(".")[2]: q for q in (*config.inputs, *config.broadcast_inputs)}
    views_stream, profiles_stream = streams["page-views"], streams["profiles"]
    system = config.stream(views_stream).system
    data = _field("watermark").isNull()
    views = read_stream(spark, config, views_stream).where(data).select(
        _field("view_id").alias("view_id"), _field("user").alias("user"),
        _field("ts").cast("long").alias("ts"))
    profiles = read_stream(spark, config, profiles_stream).where(data).select(
        _field("user").alias("p_user"), _field("ts").cast("long").alias("p_ts"))
    before = (views.join(profiles, (views.user == profiles.p_user) & (profiles.p_ts < views.ts),
                         "left")
              .groupBy("view_id").agg(F.max("p_ts").alias("p_ts")))
    expected_views = before.select(
        F.concat(F.lit("view:"), "view_id").alias("key"),
        F.concat(F.lit("profile "), F.coalesce(F.col("p_ts").cast("string"), F.lit("none")))
        .alias("expected"))
    expected_order = views.groupBy("user").agg(_ordered_ids("ts").alias("expected")).select(
        F.concat(F.lit("order:"), "user").alias("key"), "expected")
    emitted = read_stream(spark, config, f"{system}.enriched-views").select(
        _field("view_id").alias("view_id"), F.col("key").alias("user"), "partition", "offset",
        F.concat(F.lit("profile "), F.coalesce(_field("profile.ts"), F.lit("none")))
        .alias("profile"))
    output_views = emitted.groupBy("view_id").agg(
        F.concat_ws(" | ", F.sort_array(F.collect_list("profile"))).alias("output")).select(
        F.concat(F.lit("view:"), "view_id").alias("key"), "output")
    output_order = emitted.groupBy("user").agg(
        _ordered_ids("partition,offset").alias("output")).select(
        F.concat(F.lit("order:"), "user").alias("key"), "output")
    return (expected_views.unionByName(expected_order)
            .join(output_views.unionByName(output_order), "key", "full_outer"))


VERIFIERS = {"EnrichmentTask": Verifier(verify_enrichment, ("output",))}
"""Task class name → its verifier: what `framework.spark.verify` looks up."""
