"""The Spark verifier of this example (`sampan verify`): counts recomputed from the input.

Keys of the diff: each word → its number of input records, against the ``counts`` store
(its compacted changelog) and the ``count`` of the word's last output record.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from framework.config import JobConfig
from framework.spark.verify import Verifier, changelog_table, read_stream

__all__ = ["VERIFIERS", "verify_wordcount"]


def verify_wordcount(spark: SparkSession, config: JobConfig) -> DataFrame:
    """Count per word = its input records; the store and the word's last output agree."""
    [source] = config.inputs
    system = config.stream(source).system
    truth = (read_stream(spark, config, source).groupBy("key")
             .agg(F.count("*").cast("string").alias("expected")))
    store = (changelog_table(spark, config, "counts")
             .select("key", F.col("value").alias("store")))
    outputs = read_stream(spark, config, f"{system}.word-counts")
    last = (outputs.groupBy("key").agg(F.max_by("value", "offset").alias("value"))
            .select("key", F.get_json_object("value", "$.count").alias("last_output")))
    return truth.join(store, "key", "full_outer").join(last, "key", "full_outer")


VERIFIERS = {"WordCountTask": Verifier(verify_wordcount, ("store", "last_output"))}
"""Task class name → its verifier: what `framework.spark.verify` looks up."""
