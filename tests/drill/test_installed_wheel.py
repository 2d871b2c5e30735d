"""`pip install .` (a wheel, not editable) into a fresh venv, then `sampan drill` works.

The wheel is built from a copy of the project's sources and installed with ``--no-deps``
into a venv of its own; a ``.pth`` lets that venv import the dev venv's dependencies
(rocksdict, aiokafka, …) — but not its editable sampan, whose path hook only that venv's
own site directory runs. The drill runs from a folder outside the repository, so every
``framework``, ``groupers`` and ``sampan_examples`` module comes from the wheel, which
installs no top-level ``examples`` package (it would collide with other distributions').
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "framework", "groupers", "examples")

pytestmark = pytest.mark.slow


def _run(*command: str | Path, cwd: Path) -> str:
    done = subprocess.run([str(part) for part in command], cwd=cwd, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_sampan_drill_from_an_installed_wheel_is_exact(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy
        copy(REPO / name, source / name)
    for cache in source.rglob("__pycache__"):
        shutil.rmtree(cache)
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", ".", "-w", tmp_path / "dist",
         cwd=source)
    [wheel] = (tmp_path / "dist").glob("sampan-*.whl")

    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps",
         "--no-index", wheel, cwd=tmp_path)
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))",
                     cwd=tmp_path).strip())
    (site / "_sampan_test_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    origins = _run(python, "-c", "import framework, groupers, sampan_examples.wordcount as w; "
                   "print(framework.__file__, groupers.__file__, w.__file__)", cwd=elsewhere)
    assert all(path.startswith(str(site)) for path in origins.split()), origins
    assert not (site / "examples").exists()
    assert (site / "sampan_examples" / "wordcount" / "job.toml").is_file()
    top_level = _run(python, "-c", "import importlib.metadata as m; "
                     "print(m.distribution('sampan').read_text('top_level.txt') or '')",
                     cwd=elsewhere).split()
    assert "examples" not in top_level and "sampan_examples" in top_level, top_level
    missing = _run(python, "-c", "import importlib.util as u; "
                   "print(u.find_spec('examples') is None)", cwd=elsewhere)
    assert missing.strip() == "True", "a top-level `examples` package is importable"

    sampan = venv / "bin" / "sampan"
    assert ("one of: ad_join, enrichment, windowed_counts, wordcount"
            in " ".join(_run(sampan, "drill", "--help", cwd=elsewhere).split()))
    report = _run(sampan, "drill", "--records", "1000", "--keys", "50", "--rate", "5000",
                  "--steps", "4", "--workers", "1", "--monitor-interval-ms", "200",
                  "--no-plot", "--output", elsewhere / "drill", cwd=elsewhere)
    assert "expansion local.words 2→4" in report
    assert "verdict: EXACT — all 50 keys match the ground truth" in report
    assert (elsewhere / "drill" / "job" / "wordcount_task.py").is_file()
