"""Run `sampan drill` as the README does and check what every drill leaves behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run_cli_drill(out: Path, *args: str, timeout: float) -> str:
    """`sampan drill ARGS --output OUT`: exit 0, the report in ``OUT/report.txt`` equal to
    what it printed, and a timeline plot; returns what it printed."""
    done = subprocess.run(
        [sys.executable, "-m", "framework.cli", "drill", *args, "--output", str(out)],
        capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (out / "report.txt").read_text().strip() == done.stdout.strip()
    assert (out / "timeline.png").stat().st_size > 10_000
    return done.stdout
