"""The driver JVM's start-up options: the C1 compiler only, the serial collector, and a
class-data-sharing archive of the classes Spark loads.

A small Spark command spends most of its CPU starting the JVM: loading and verifying ~20,000
classes and compiling the hot ones with C2. C1 alone and one GC thread halve that; mapping
the classes from an archive that an earlier session wrote halves it again (docs/spark.md,
"Start-up"). The first session without an archive writes one as its JVM exits; it is kept
only once a JVM has mapped it, since a JVM given a torn archive crashes.

Kept free of Spark imports, like `framework.spark.env`.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from framework.coordinator.lease import pid_alive

__all__ = ["ARCHIVE_ENV", "COMPILER_OPTIONS", "ClassArchive", "class_archive",
           "driver_java_options", "keep_archive"]

ARCHIVE_ENV = "SAMPAN_SPARK_CLASS_ARCHIVE"
"""``off``: no class archive; a folder: keep archives there (default
``~/.cache/sampan/spark-classes``)."""
COMPILER_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""C1 only and one GC thread: a driver JVM's work here is start-up and query planning."""
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # a stale archive is skipped without a word
_CLASSPATH_KEYS = ("spark.jars", "spark.jars.packages", "spark.driver.extraClassPath")
_CHECK_SECONDS = 120.0


@dataclass(frozen=True)
class ClassArchive:
    """Where the archive of this JVM and class path lives; ``dump``: where this session's
    JVM writes one at exit, when none exists yet."""

    path: Path
    dump: Path | None = None


def _folder() -> Path | None:
    setting = os.environ.get(ARCHIVE_ENV, "").strip()
    if setting.lower() == "off":
        return None
    return Path(setting) if setting else Path.home() / ".cache" / "sampan" / "spark-classes"


def _drop_abandoned(folder: Path) -> None:
    """Remove dumps whose JVM is gone without its session keeping them (killed mid-way)."""
    for dump in folder.glob("*.dump-*"):
        pid = dump.name.rpartition("-")[2]
        if pid.isdigit() and not pid_alive(int(pid)):
            dump.unlink(missing_ok=True)


def class_archive(java: str, spark_home: Path, conf: Mapping[str, str]) -> ClassArchive | None:
    """The archive for this ``java``, Spark installation and class path settings; ``None``
    when archives are off or the cache folder cannot be written."""
    folder = _folder()
    if folder is None:
        return None
    binary = Path(java).resolve()
    stat = binary.stat()
    identity = "\n".join([str(binary), str(stat.st_size), str(stat.st_mtime_ns),
                          str(spark_home.resolve()), COMPILER_OPTIONS,
                          *(f"{k}={conf.get(k, '')}" for k in _CLASSPATH_KEYS)])
    path = folder / f"spark-{hashlib.sha256(identity.encode()).hexdigest()[:16]}.jsa"
    if path.is_file():
        return ClassArchive(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _drop_abandoned(folder)
    except OSError:
        return None
    if not os.access(folder, os.W_OK):
        return None
    return ClassArchive(path, path.with_name(f"{path.name}.dump-{os.getpid()}"))


def driver_java_options(archive: ClassArchive | None, user: str = "") -> str:
    """``spark.driver.extraJavaOptions``: ours first, so that the user's ``user`` win."""
    options = [COMPILER_OPTIONS]
    if archive is not None:
        options.append(f"-XX:ArchiveClassesAtExit={archive.dump}" if archive.dump
                       else f"-XX:SharedArchiveFile={archive.path}")
        options.append(_QUIET)
    return " ".join([*options, user]).strip()


def keep_archive(archive: ClassArchive, java: str, exit_status: int | None) -> bool:
    """Move the archive the JVM wrote at exit into place if that JVM exited cleanly and a
    new JVM maps it; otherwise delete it. True when kept."""
    dump = archive.dump
    if dump is None:
        return False
    try:
        if exit_status != 0 or not dump.is_file():
            return False
        check = subprocess.run(
            [java, f"-XX:SharedArchiveFile={dump}", *_QUIET.split(), "-XX:ErrorFile=/dev/null",
             "-version"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            timeout=_CHECK_SECONDS, check=False)
        if check.returncode != 0:
            print(f"sampan: the Spark class archive {dump} does not load (java exit "
                  f"{check.returncode}); deleted, the next session writes another",
                  file=sys.stderr)
            return False
        os.replace(dump, archive.path)
        return True
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        dump.unlink(missing_ok=True)
