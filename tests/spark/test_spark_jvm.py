"""The driver JVM's start-up options: C1 and serial GC, and the class archive that the first
session writes and later sessions map — kept only when a JVM loads it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pyspark.find_spark_home import _find_spark_home

from framework.spark import jvm
from framework.spark.env import java_binary
from framework.spark.jvm import ClassArchive, class_archive, driver_java_options, keep_archive

JAVA = java_binary() or "java"
QUIET = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]


def _dumped_archive(folder: Path) -> Path:
    """A real (small) dynamic archive: what a JVM writes at exit."""
    path = folder / "written.jsa"
    subprocess.run([JAVA, f"-XX:ArchiveClassesAtExit={path}", *QUIET, "-version"],
                   check=True, capture_output=True)
    return path


def test_options_are_c1_and_serial_gc_then_the_archive_then_the_users() -> None:
    first = ClassArchive(Path("/c/spark-1.jsa"), Path("/c/spark-1.jsa.dump-7"))
    later = ClassArchive(Path("/c/spark-1.jsa"))

    assert driver_java_options(None, "-Dx=1") == "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Dx=1"
    assert driver_java_options(first) == (
        "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ArchiveClassesAtExit=/c/spark-1.jsa.dump-7 "
        "-Xlog:cds=off -Xlog:cds+dynamic=off")
    assert driver_java_options(later, "-XX:+UseG1GC") == (
        "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:SharedArchiveFile=/c/spark-1.jsa "
        "-Xlog:cds=off -Xlog:cds+dynamic=off -XX:+UseG1GC")


def test_no_archive_when_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(jvm.ARCHIVE_ENV, "off")

    assert class_archive(JAVA, Path(sys.prefix), {}) is None


def test_archives_differ_by_class_path_settings(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(jvm.ARCHIVE_ENV, str(tmp_path))

    plain = class_archive(JAVA, Path(sys.prefix), {})
    with_jars = class_archive(JAVA, Path(sys.prefix), {"spark.jars": "/x/extra.jar"})

    assert plain is not None and with_jars is not None
    assert plain.path.parent == tmp_path and plain.path.name.endswith(".jsa")
    assert plain.path != with_jars.path
    assert plain.dump == plain.path.with_name(f"{plain.path.name}.dump-{os.getpid()}")


def test_a_dump_whose_process_is_gone_is_removed(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(jvm.ARCHIVE_ENV, str(tmp_path))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    abandoned = tmp_path / f"spark-0.jsa.dump-{gone}"
    running = tmp_path / f"spark-0.jsa.dump-{os.getpid()}"
    abandoned.write_bytes(b"torn")
    running.write_bytes(b"being written")

    class_archive(JAVA, Path(sys.prefix), {})

    assert not abandoned.exists()
    assert running.read_bytes() == b"being written"


def test_a_whole_archive_is_kept(tmp_path: Path) -> None:
    archive = ClassArchive(tmp_path / "spark-1.jsa", _dumped_archive(tmp_path))
    written = archive.dump.read_bytes() if archive.dump else b""

    assert keep_archive(archive, JAVA, 0)
    assert archive.path.read_bytes() == written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spark-1.jsa"]


def test_a_torn_archive_is_deleted_not_kept(tmp_path: Path) -> None:
    written = _dumped_archive(tmp_path)
    torn = tmp_path / "spark-1.jsa.dump-1"
    torn.write_bytes(written.read_bytes()[: written.stat().st_size // 2])
    written.unlink()

    assert not keep_archive(ClassArchive(tmp_path / "spark-1.jsa", torn), JAVA, 0)
    assert list(tmp_path.iterdir()) == []


def test_the_archive_of_a_jvm_that_failed_is_deleted(tmp_path: Path) -> None:
    archive = ClassArchive(tmp_path / "spark-1.jsa", _dumped_archive(tmp_path))

    assert not keep_archive(archive, JAVA, 1)
    assert not keep_archive(ClassArchive(tmp_path / "spark-1.jsa", tmp_path / "none"), JAVA, 0)
    assert list(tmp_path.iterdir()) == []


SESSION = """
import sys
from framework.spark import local_session
spark = local_session()
arguments = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
print("ARGS", " ".join(str(a) for a in arguments.getInputArguments()), flush=True)
"""
# No Spark job: the JVM answering shows it runs on these options, and every class a job
# loads made the archive bigger and its dump at exit slower.


def _session(folder: Path) -> str:
    env = {**os.environ, jvm.ARCHIVE_ENV: str(folder)}
    done = subprocess.run([sys.executable, "-c", SESSION], env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    [arguments] = [line for line in done.stdout.splitlines() if line.startswith("ARGS ")]
    return arguments


@pytest.mark.timeout(600)  # a Spark session from scratch, writing the archive at its exit
def test_the_first_session_writes_the_archive_and_the_next_maps_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The first session's JVM writes the archive at exit, kept once a JVM started on it
    exits cleanly; the next session finds it with nothing to write and its JVM options map
    it: the same `class_archive` and `driver_java_options` that `local_session` calls (for
    its Spark installation, no class path settings). One Spark session: a second cold one
    showed again only that the options reach the JVM, which the first shows."""
    first = _session(tmp_path)
    [archive] = list(tmp_path.iterdir())
    monkeypatch.setenv(jvm.ARCHIVE_ENV, str(tmp_path))
    later = class_archive(JAVA, Path(_find_spark_home()), {})

    assert archive.name.startswith("spark-") and archive.suffix == ".jsa"
    assert f"-XX:ArchiveClassesAtExit={archive}.dump-" in first
    assert "-XX:TieredStopAtLevel=1" in first and "-XX:+UseSerialGC" in first
    assert later == ClassArchive(archive)  # found; no dump to write
    assert f"-XX:SharedArchiveFile={archive}" in driver_java_options(later).split()
    assert list(tmp_path.iterdir()) == [archive]


def test_the_python_workers_handshake_waits_minutes_not_seconds(spark: Any) -> None:
    assert spark.sparkContext.getConf().get("spark.python.authenticate.socketTimeout") == "300s"


def test_the_planner_processes_import_no_read_path() -> None:
    probe = ("import sys, framework.spark.source; "
             "print(sorted(m for m in ('pyarrow', 'pandas', 'aiokafka') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)

    assert done.stdout.strip() == "[]"
