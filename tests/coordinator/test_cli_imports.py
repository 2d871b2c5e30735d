"""What a `sampan` process imports before it works: a command line that names a command
loads that command alone (every worker process parses one), `--help` lists them all."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from framework.cli import COMMANDS

REPO = Path(__file__).resolve().parents[2]


def _sampan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-X", "importtime", "-m", "framework.cli", *args],
                          capture_output=True, text=True, timeout=300, cwd=REPO)


def _imported(stderr: str) -> set[str]:
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


def test_a_worker_command_line_imports_no_other_command() -> None:
    done = _sampan("worker", "--help")
    assert done.returncode == 0, done.stderr
    imported = _imported(done.stderr)
    assert "framework.worker.main" in imported
    others = {module for name, (module, _) in COMMANDS.items() if name != "worker"}
    assert not others & imported, others & imported
    assert "framework.pipelines.graph" not in imported  # `describe`'s, the costliest
    assert "importlib.metadata" not in imported  # the version is looked up when asked


def test_help_still_lists_every_command_and_version_answers() -> None:
    done = _sampan("--help")
    assert done.returncode == 0, done.stderr
    for name in ("expansion-plan", *COMMANDS):
        assert f"    {name} " in done.stdout or f"    {name}\n" in done.stdout, name
    version = _sampan("--version")
    assert version.returncode == 0 and version.stdout.startswith("sampan "), version
