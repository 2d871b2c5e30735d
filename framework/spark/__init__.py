"""The batch pipeline on Spark: a ``sampan`` DataSource, verification and offline re-key.

Spark is imported only in this package. Importing it checks that PySpark and Java are
there and raises `SparkUnavailableError` naming the fix otherwise::

    from framework.spark import local_session, register
    spark = local_session()
    register(spark)
    spark.read.format("sampan").option("job", "job.toml").option("stream", "local.words").load()
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from framework.spark.env import check_spark, java_binary, loopback_environment

check_spark()
loopback_environment()

from pyspark import SparkContext  # noqa: E402
from pyspark.find_spark_home import _find_spark_home  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

from framework.spark.errors import (  # noqa: E402
    RekeyError,
    SparkOptionError,
    SparkUnavailableError,
    VerificationError,
)
from framework.spark.jvm import (  # noqa: E402
    ClassArchive,
    class_archive,
    driver_java_options,
    keep_archive,
)
from framework.spark.workers import worker_python  # noqa: E402

__all__ = [
    "RekeyError",
    "SparkOptionError",
    "SparkUnavailableError",
    "VerificationError",
    "local_session",
    "register",
]


def register(spark: SparkSession) -> None:
    """Make ``format("sampan")`` available on ``spark`` (idempotent) and make ``spark`` the
    calling thread's active session: Spark finds a Python data source for a *write* in the
    thread's active session, not the DataFrame's (a read uses the reader's session), so a
    write from a thread where another session, or none, is active fails with
    ``DATA_SOURCE_NOT_FOUND``. Call it in the thread that writes."""
    from framework.spark.source import SampanDataSource

    spark.dataSource.register(SampanDataSource)
    jvm: Any = getattr(spark, "_jvm", None)
    if jvm is not None:  # a classic session; Spark Connect keeps no thread-local session
        jvm.SparkSession.setActiveSession(spark._jsparkSession)  # noqa: SLF001 - no public setter


PYTHON_AUTH_TIMEOUT = "300s"
"""``spark.python.authenticate.socketTimeout`` (Spark's default: 15 s): how long the JVM and
a starting Python worker or planner wait for each other's handshake. A loaded machine starts
Python slowly; a generous bound only matters when something is stuck."""


def local_session(master: str = "local[2]", app: str = "sampan",
                  options: Mapping[str, str] | None = None) -> SparkSession:
    """A loopback-only local session with the UI off and few shuffle partitions, with the
    ``sampan`` DataSource registered; ``options``: more Spark settings (set at start).

    A session that starts the JVM starts it quickly (`framework.spark.jvm`) and has Spark
    start Python workers that import compiled pyspark (`framework.spark.workers`); their
    handshake waits `PYTHON_AUTH_TIMEOUT`."""
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.authenticate.socketTimeout": PYTHON_AUTH_TIMEOUT,
        **(options or {}),
    }
    archive, java = None, java_binary()
    if _gateway() is None and java is not None:  # this session launches the JVM
        spark_home = Path(_find_spark_home())
        if os.environ.get("PYSPARK_PYTHON") == sys.executable:  # ours, not the user's
            os.environ["PYSPARK_PYTHON"] = worker_python(spark_home)
        archive = class_archive(java, spark_home, settings)
        settings["spark.driver.extraJavaOptions"] = driver_java_options(
            archive, settings.get("spark.driver.extraJavaOptions", ""))
    builder = SparkSession.builder.master(master).appName(app)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if archive is not None and archive.dump is not None and java is not None:
        atexit.register(_keep_class_archive, archive, java)
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def _gateway() -> Any:
    """PySpark's gateway to the driver JVM (``proc``: the JVM's process); None until a
    session launched one. PySpark has no public call for either."""
    return SparkContext._gateway  # noqa: SLF001


def _keep_class_archive(archive: ClassArchive, java: str) -> None:
    """At exit: end the JVM (it exits when its stdin closes, writing the class archive) and
    keep the archive if it loads."""
    process = getattr(_gateway(), "proc", None)
    if process is None or process.stdin is None:
        return
    process.stdin.close()
    try:
        status = process.wait(timeout=300)
    except subprocess.TimeoutExpired:
        status = None
    keep_archive(archive, java, status)
