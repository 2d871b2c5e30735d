"""Ground-truth verification in Spark: recompute a job's expected results from its inputs
and diff them against its output stream and its stores' compacted changelogs.

Every verifier builds one DataFrame ``key, expected, <actual columns…>`` (strings; null
when absent) and `classify` sorts each key into matched / missing / extra / wrong.
Verifiers live with the job, not here: ``spark_verify.py`` next to the job file defines
``VERIFIERS = {"TaskClass": Verifier(function, actual_columns)}`` (every example does).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from framework.config import JobConfig, load_config
from framework.metadata import read_latest_model
from framework.spark.aio import with_system
from framework.spark.errors import VerificationError

__all__ = ["VERIFIER_MODULE", "VerificationReport", "Verifier", "changelog_table", "classify",
           "find_verifier", "read_stream", "verify_job"]

VERIFIER_MODULE = "spark_verify.py"
"""The module next to a job file that registers its verifiers."""

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


class Verifier(NamedTuple):
    """How to verify one task class's jobs: ``function`` builds ``key, expected, *actuals``."""

    function: Callable[[SparkSession, JobConfig], DataFrame]
    actuals: tuple[str, ...]
    """The actual columns ``function`` adds after ``expected`` (e.g. ``("output",)``)."""


def _job_verifiers(config: JobConfig) -> Mapping[str, Verifier]:
    """``VERIFIERS`` of the job's ``spark_verify.py`` (empty when there is none)."""
    path = config.root / VERIFIER_MODULE
    if not path.is_file():
        return {}
    name = f"_sampan_spark_verify_{abs(hash(str(path.resolve())))}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and pickling look their module up there
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    verifiers = getattr(sys.modules[name], "VERIFIERS", None)
    if not isinstance(verifiers, Mapping):
        raise VerificationError(f"{path} defines no VERIFIERS mapping (task class name → "
                                f"Verifier(function, actual columns)); see docs/spark.md")
    return verifiers


def find_verifier(config: JobConfig) -> Verifier:
    """The verifier registered for the job's task class next to its job file."""
    task = config.task.rpartition(":")[2]
    verifiers = _job_verifiers(config)
    if task not in verifiers:
        where = config.root / VERIFIER_MODULE
        known = (f"{where} registers task classes {sorted(verifiers)}" if verifiers
                 else f"there is no {where}")
        raise VerificationError(
            f"no Spark verifier for job.task = {config.task!r} in {config.path}; {known}. "
            f"Register one there: VERIFIERS = {{{task!r}: Verifier(function, actual "
            f"columns)}} (docs/spark.md)")
    return verifiers[task]


def verify_job(
    job_path: str | os.PathLike[str], spark: SparkSession | None = None
) -> VerificationReport:
    """Verify the job at ``job_path`` with the verifier registered for its task class."""
    config = load_config(job_path)
    verifier, actuals = find_verifier(config)
    if spark is None:
        from framework.spark import local_session

        spark = local_session()
    else:
        from framework.spark import register

        register(spark)
    result = classify(verifier(spark, config), actuals)
    return VerificationReport(job=config.name, verifier=verifier.__name__, **result)


def report_json(report: VerificationReport) -> str:
    """The report as one JSON document (for ``sampan verify --json``)."""
    return json.dumps(report.to_json(), sort_keys=True)
