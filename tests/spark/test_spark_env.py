"""`framework.spark` says what to install when PySpark or Java is missing."""

from __future__ import annotations

import importlib.util

import pytest

from framework.spark import env
from framework.spark.errors import SparkUnavailableError


def test_missing_pyspark_names_the_spark_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pyspark" else real(name, *a))

    with pytest.raises(SparkUnavailableError, match=r"run `pip install -e '\.\[spark\]'`"):
        env.check_spark()


def test_missing_java_says_to_install_a_jdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")

    with pytest.raises(SparkUnavailableError, match="no `java` was found on PATH or in "
                       r"\$JAVA_HOME; install a JDK"):
        env.check_spark()
