"""Ground-truth verification in Spark: recompute a job's expected results from its inputs
and diff them against its output stream and its stores' compacted changelogs.

Every verifier builds one DataFrame ``key, expected, <actual columns…>`` (strings; null
when absent) and `classify` sorts each key into matched / missing / extra / wrong.
Verifiers are chosen by the job's task class (`VERIFIERS`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from framework.config import JobConfig, load_config
from framework.metadata import read_latest_model
from framework.spark.aio import with_system
from framework.spark.errors import VerificationError
from framework.spark.verify_ad_join import verify_ad_join
from framework.spark.verify_enrichment import verify_enrichment
from framework.spark.verify_windowed_counts import verify_windowed_counts

__all__ = ["VERIFIERS", "VerificationReport", "changelog_table", "classify", "read_stream",
           "verify_job"]

EXAMPLES = 5


@dataclass
class VerificationReport:
    """What a verification found; ``examples`` holds up to 5 keys per category."""

    job: str
    verifier: str
    matched: int = 0
    missing: int = 0
    extra: int = 0
    wrong: int = 0
    examples: dict[str, list[str]] = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        """True iff every expected key matched and nothing else appeared."""
        return self.missing == self.extra == self.wrong == 0 and self.matched > 0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "exact": self.exact}

    def text(self) -> str:
        verdict = "EXACT" if self.exact else "NOT EXACT"
        lines = [f"job {self.job} ({self.verifier}): {verdict} — matched {self.matched}, "
                 f"missing {self.missing}, extra {self.extra}, wrong {self.wrong}"]
        for category in ("missing", "extra", "wrong"):
            for example in self.examples.get(category, []):
                lines.append(f"  {category}: {example}")
        return "\n".join(lines)


def read_stream(
    spark: SparkSession, config: JobConfig, stream: str, partitions: Sequence[int] | None = None
) -> DataFrame:
    """The decoded records of ``stream`` (qualified), optionally only some partitions."""
    reader = (spark.read.format("sampan").option("job", str(config.path))
              .option("stream", stream))
    if partitions is not None:
        reader = reader.option("partitions", ",".join(str(p) for p in partitions))
    return reader.load()


def changelog_table(spark: SparkSession, config: JobConfig, store: str) -> DataFrame:
    """A logged store's contents, ``key, value``: per key the latest changelog record in the
    changelog partitions of the current job model's tasks; tombstones drop the key."""
    model = with_system(config, config.metadata_system,
                        lambda meta: read_latest_model(meta, config))
    if model is None:
        raise VerificationError(
            f"job {config.name!r} has no job model in {config.coordinator_stream}; run it "
            f"first with `sampan run {config.path}`")
    partitions = sorted({task.changelog_partition for task in model.tasks.values()})
    records = read_stream(spark, config, config.changelog_stream(store), partitions)
    latest = records.groupBy("partition", "key").agg(
        F.max_by("value", "offset").alias("value"))
    return latest.where(F.col("value").isNotNull()).select("key", "value")


def classify(table: DataFrame, actuals: Sequence[str]) -> dict[str, Any]:
    """Counts and examples per category of ``table`` (``key, expected, *actuals``)."""
    agree = F.lit(True)
    for column in actuals:
        agree = agree & F.col(column).eqNullSafe(F.col("expected"))
    absent = F.lit(True)
    for column in actuals:
        absent = absent & F.col(column).isNull()
    category: Column = (
        F.when(F.col("expected").isNull(), "extra").when(agree, "matched")
        .when(absent, "missing").otherwise("wrong"))
    labelled = table.withColumn("category", category).cache()
    try:
        counts = {row["category"]: row["count"]
                  for row in labelled.groupBy("category").count().collect()}
        examples: dict[str, list[str]] = {}
        for name in ("missing", "extra", "wrong"):
            if counts.get(name):
                rows = (labelled.where(F.col("category") == name).orderBy("key")
                        .limit(EXAMPLES).collect())
                examples[name] = [
                    f"{row['key']}: expected {row['expected']}, "
                    + ", ".join(f"{c} {row[c]}" for c in actuals) for row in rows]
    finally:
        labelled.unpersist()
    return {"matched": counts.get("matched", 0), "missing": counts.get("missing", 0),
            "extra": counts.get("extra", 0), "wrong": counts.get("wrong", 0),
            "examples": examples}


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


Verifier = Callable[[SparkSession, JobConfig], DataFrame]

VERIFIERS: dict[str, tuple[Verifier, tuple[str, ...]]] = {
    "WordCountTask": (verify_wordcount, ("store", "last_output")),
    "AdJoinTask": (verify_ad_join, ("output",)),
    "EnrichmentTask": (verify_enrichment, ("output",)),
    "WindowedCountsTask": (verify_windowed_counts, ("output",)),
}
"""Task class name → (verifier, its actual columns)."""


def verify_job(
    job_path: str | os.PathLike[str], spark: SparkSession | None = None
) -> VerificationReport:
    """Verify the job at ``job_path`` with the verifier of its task class."""
    config = load_config(job_path)
    task = config.task.rpartition(":")[2]
    if task not in VERIFIERS:
        raise VerificationError(
            f"no Spark verifier for job.task = {config.task!r} in {config.path}; verifiers "
            f"exist for task classes {sorted(VERIFIERS)}")
    if spark is None:
        from framework.spark import local_session

        spark = local_session()
    else:
        from framework.spark import register

        register(spark)
    verifier, actuals = VERIFIERS[task]
    result = classify(verifier(spark, config), actuals)
    return VerificationReport(job=config.name, verifier=verifier.__name__, **result)


def report_json(report: VerificationReport) -> str:
    """The report as one JSON document (for ``sampan verify --json``)."""
    return json.dumps(report.to_json(), sort_keys=True)
