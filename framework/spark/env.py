"""The environment PySpark needs: pyspark importable, a `java` binary, loopback-only networking.

Kept free of Spark imports so that `framework.spark` can raise a clear error before
PySpark fails with a stack trace of its own.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

from framework.spark.errors import SparkUnavailableError

__all__ = ["check_spark", "java_binary", "loopback_environment"]

INSTALL_HINT = "pip install -e '.[spark]'"


def java_binary() -> str | None:
    """The ``java`` Spark starts: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def check_spark() -> None:
    """Raise `SparkUnavailableError` naming the fix when pyspark or Java is missing."""
    if importlib.util.find_spec("pyspark") is None:
        raise SparkUnavailableError(
            f"framework.spark needs PySpark, which is not installed; run `{INSTALL_HINT}` "
            "(installs pyspark[sql] and pandas<3)")
    if java_binary() is None:
        raise SparkUnavailableError(
            "framework.spark needs Java 17 or newer to start Spark, and no `java` was found "
            "on PATH or in $JAVA_HOME; install a JDK (e.g. `apt-get install openjdk-17-jre-"
            "headless`) or set JAVA_HOME")


def loopback_environment() -> None:
    """Run Spark's Python workers on this interpreter and bind everything to 127.0.0.1."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("SPARK_LOCAL_HOSTNAME", "localhost")
