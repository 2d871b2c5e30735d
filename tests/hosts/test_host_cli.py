"""`sampan run --host` refuses what cannot work, naming why and the fix."""

from __future__ import annotations

import subprocess
from pathlib import Path

from jobs.harness import CLI


def _local_job(folder: Path) -> Path:
    path = folder / "job.toml"
    path.write_text("""\
[job]
name = "local-sums"
task = "framework.drill.sum_task:SumTask"
inputs = ["local.in"]

[systems.local]
type = "local"

[streams."local.in"]
partitions = 2

[stores.totals]
""")
    return path


def test_host_on_the_local_log_and_data_dir_without_host_exit_2(tmp_path: Path) -> None:
    done = subprocess.run([*CLI, "run", str(_local_job(tmp_path)), "--host", "a"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "lives on one machine" in done.stderr
    assert "run it without --host" in done.stderr and "kafka system" in done.stderr
    assert not (tmp_path / "state").exists()  # nothing started
    done = subprocess.run([*CLI, "run", str(_local_job(tmp_path)), "--data-dir", "x"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "add --host NAME" in done.stderr
