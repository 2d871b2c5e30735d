"""The batch pipeline on Spark: a ``sampan`` DataSource, verification and offline re-key.

Spark is imported only in this package. Importing it checks that PySpark and Java are
there and raises `SparkUnavailableError` naming the fix otherwise::

    from framework.spark import local_session, register
    spark = local_session()
    register(spark)
    spark.read.format("sampan").option("job", "job.toml").option("stream", "local.words").load()
"""

from __future__ import annotations

from collections.abc import Mapping

from framework.spark.env import check_spark, loopback_environment

check_spark()
loopback_environment()

from pyspark.sql import SparkSession  # noqa: E402

from framework.spark.errors import (  # noqa: E402
    RekeyError,
    SparkOptionError,
    SparkUnavailableError,
    VerificationError,
)

__all__ = [
    "RekeyError",
    "SparkOptionError",
    "SparkUnavailableError",
    "VerificationError",
    "local_session",
    "register",
]


def register(spark: SparkSession) -> None:
    """Make ``format("sampan")`` available on ``spark`` (idempotent)."""
    from framework.spark.source import SampanDataSource

    spark.dataSource.register(SampanDataSource)


def local_session(master: str = "local[2]", app: str = "sampan",
                  options: Mapping[str, str] | None = None) -> SparkSession:
    """A loopback-only local session with the UI off and few shuffle partitions, with the
    ``sampan`` DataSource registered; ``options``: more Spark settings (set at start)."""
    builder = (
        SparkSession.builder.master(master).appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    for key, value in (options or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
