"""The interpreter Spark starts for its Python workers and planners: this one, importing the
pyspark and py4j installed with it rather than the source zips Spark puts first on their
``PYTHONPATH``; a process Spark starts on its own connects back before it imports them.

Spark prepends ``$SPARK_HOME/python/lib/pyspark.zip`` and py4j's zip to every Python process
it starts. Python imports from a zip without writing bytecode, so each process compiles
pyspark anew: 1.3 s of CPU before it can connect back to the JVM, against 0.4 s from the
installed package. A small command starts five or six such processes, and a streaming
source's must connect back within a fixed 10 s (docs/spark.md, "Start-up"). With pip's
layout (``SPARK_HOME`` is the installed pyspark) the zips hold the same files as the
package, so a small launcher drops them from ``PYTHONPATH`` and runs this interpreter —
for a streaming source's runner through `framework.spark.connect_first`, so that the 10 s
cover starting Python and connecting only.

Kept free of Spark imports, like `framework.spark.env`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

__all__ = ["LAUNCHER_ENV", "launcher_script", "worker_python"]

LAUNCHER_ENV = "SAMPAN_SPARK_PYTHON_LAUNCHER"
"""``off``: Spark starts ``sys.executable`` as it is; a folder: where the launcher lives
(default ``~/.cache/sampan/spark-python``)."""


def _bundled_zips(spark_home: Path) -> list[Path]:
    """The zips of ``spark_home`` that hold exactly what is installed here."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return []
    installed = Path(spec.origin).parent.resolve()
    if spark_home.resolve() != installed:  # a Spark of its own: its zips are its Python
        return []
    names = ["pyspark.zip"]
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        names.append(f"py4j-{importlib.metadata.version('py4j')}-src.zip")
    # As Spark spells them (from SPARK_HOME) and resolved, should the two differ.
    zips = dict.fromkeys(home / "python" / "lib" / name
                         for name in names for home in (spark_home, installed))
    return [z for z in zips if z.is_file() and "'" not in str(z)]


CONNECT_FIRST = Path(__file__).with_name("connect_first.py")
"""Runs the processes Spark starts on their own (`STARTED_ALONE`), connecting back first."""
STARTED_ALONE = ("pyspark.sql.streaming.python_streaming_source_runner",)
"""The pyspark modules sampan has Spark start as processes of their own: a streaming
source's runner (``readStream``)."""


def launcher_script(python: str, dropped: list[Path]) -> str:
    """A POSIX shell script running ``python`` with ``dropped`` removed from PYTHONPATH;
    the modules of `STARTED_ALONE` through `CONNECT_FIRST`."""
    cases = "|".join(f"'{path}'" for path in dropped)
    alone = "|".join(STARTED_ALONE)
    return f"""#!/bin/sh
# sampan: Spark's Python workers import the installed, compiled pyspark and py4j, not the
# source zips Spark puts first on PYTHONPATH (framework/spark/workers.py).
kept=
set -f
IFS=:
for entry in $PYTHONPATH; do
  case "$entry" in
    {cases}) ;;
    *) kept="${{kept:+$kept:}}$entry" ;;
  esac
done
unset IFS
set +f
PYTHONPATH=$kept
export PYTHONPATH
if [ "$1" = -m ]; then
  case "$2" in
    {alone}) module=$2; shift 2; exec '{python}' -P '{CONNECT_FIRST}' "$module" "$@" ;;
  esac
fi
exec '{python}' "$@"
"""


def worker_python(spark_home: Path) -> str:
    """The executable for ``PYSPARK_PYTHON``: the launcher, written once into the cache
    folder, or ``sys.executable`` when there is nothing to drop or no folder to write."""
    setting = os.environ.get(LAUNCHER_ENV, "").strip()
    dropped = [] if setting.lower() == "off" else _bundled_zips(spark_home)
    if not dropped or "'" in sys.executable or "'" in str(CONNECT_FIRST):
        return sys.executable
    script = launcher_script(sys.executable, dropped)
    folder = Path(setting) if setting else Path.home() / ".cache" / "sampan" / "spark-python"
    path = folder / f"python-{hashlib.sha256(script.encode()).hexdigest()[:16]}"
    if path.is_file():
        return str(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=folder, delete=False) as draft:
            draft.write(script)
        os.chmod(draft.name, 0o755)
        os.replace(draft.name, path)
    except OSError:
        return sys.executable
    return str(path)
