"""Spark's Python workers import the installed, compiled pyspark, not the source zips that
Spark puts first on their PYTHONPATH."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyspark
import pytest

from framework.spark import workers
from framework.spark.workers import worker_python

SPARK_HOME = Path(pyspark.__file__).parent
LIB = SPARK_HOME / "python" / "lib"


def test_the_launcher_drops_the_bundled_zips_and_keeps_every_other_entry(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(workers.LAUNCHER_ENV, str(tmp_path))
    [py4j] = LIB.glob("py4j-*-src.zip")
    spark_path = os.pathsep.join([str(LIB / "pyspark.zip"), str(py4j), "/opt/a", "/opt/b c"])

    launcher = worker_python(SPARK_HOME)
    done = subprocess.run(
        [launcher, "-c", "import os, pyspark, py4j; print(os.environ['PYTHONPATH']); "
         "print(pyspark.__file__); print(py4j.__file__)"],
        env={**os.environ, "PYTHONPATH": spark_path}, capture_output=True, text=True, check=True)

    assert Path(launcher).parent == tmp_path
    assert done.stdout.splitlines() == [
        "/opt/a:/opt/b c", pyspark.__file__, str(Path(__import__("py4j").__file__))]


def test_no_launcher_when_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(workers.LAUNCHER_ENV, "off")

    assert worker_python(SPARK_HOME) == sys.executable


def test_no_launcher_for_a_spark_of_its_own(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(workers.LAUNCHER_ENV, str(tmp_path / "launchers"))
    (tmp_path / "spark" / "python" / "lib").mkdir(parents=True)
    (tmp_path / "spark" / "python" / "lib" / "pyspark.zip").write_bytes(b"")

    assert worker_python(tmp_path / "spark") == sys.executable


def test_a_spark_task_imports_the_installed_pyspark(spark: Any) -> None:
    def _where_pyspark(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for _ in batches:
            pass
        yield pa.RecordBatch.from_pylist([{"file": pyspark.__file__}])

    rows = spark.range(1).mapInArrow(_where_pyspark, "file string").collect()

    assert {row.file for row in rows} == {pyspark.__file__}


def test_a_streaming_runner_connects_back_before_it_imports_pyspark(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Spark gives the process a fixed 10 s to connect: the launcher makes that cover
    starting Python and connecting, not importing pyspark and pyarrow too."""
    monkeypatch.setenv(workers.LAUNCHER_ENV, str(tmp_path))
    launcher = worker_python(SPARK_HOME)
    jvm = socket.create_server(("127.0.0.1", 0))
    jvm.settimeout(120)
    secret = "s3cret"
    env = {**os.environ, "PYTHON_WORKER_FACTORY_PORT": str(jvm.getsockname()[1]),
           "PYTHON_WORKER_FACTORY_SECRET": secret, "SPARK_AUTH_SOCKET_TIMEOUT": "120",
           "PYTHONPATH": str(LIB / "pyspark.zip")}
    runner = subprocess.Popen(
        [launcher, "-m", "pyspark.sql.streaming.python_streaming_source_runner"], env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        connection, _ = jvm.accept()
        with connection, connection.makefile("rwb") as stream:
            [length] = struct.unpack("!i", stream.read(4))
            received = stream.read(length).decode()
            # The runner now waits for our answer: what has it loaded so far?
            loaded = Path(f"/proc/{runner.pid}/maps").read_text()
            stream.write(struct.pack("!i", 2) + b"ok")
            stream.flush()
            [pid] = struct.unpack("!i", stream.read(4))
    finally:
        jvm.close()
        runner.wait(timeout=120)

    assert received == secret
    assert pid == runner.pid
    assert "pyarrow" not in loaded
