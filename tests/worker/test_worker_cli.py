"""Bad job files through the CLI: one stderr line with the cause and the fix; `sampan run`
exits 2, `sampan worker` 5 (an error a restart cannot fix: its `sampan run` stops the job)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from jobs import harness as h
from jobs import jobfiles as jf

from framework.errors import EXIT_PERMANENT

EXIT = {"run": 2, "worker": EXIT_PERMANENT}


def _sampan(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "framework.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(h.REPO), "PATH": ""})


def _job(tmp_path: Path, old: str, new: str) -> Path:
    path = jf.write_job(tmp_path / "job")
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize("command", ["worker", "run"])
def test_an_unknown_key_names_file_line_and_the_close_key(tmp_path: Path, command: str) -> None:
    _job(tmp_path, "commit_interval_ms = 100", "commit_intervall_ms = 100")
    done = _sampan(command, "job.toml", cwd=tmp_path / "job")
    assert (done.returncode, done.stdout) == (EXIT[command], "")
    assert done.stderr == (f"sampan {command}: error: job.toml:5: job.commit_intervall_ms: "
                           'unknown key; did you mean "commit_interval_ms"?\n')
    assert not (tmp_path / "job" / "data").exists()  # refused before anything started


def test_a_wrong_type_names_the_expected_form(tmp_path: Path) -> None:
    _job(tmp_path, "fetch_max_records = 2000", 'fetch_max_records = "2000"')
    done = _sampan("worker", "job.toml", cwd=tmp_path / "job")
    assert done.returncode == EXIT_PERMANENT
    assert done.stderr == ('sampan worker: error: job.toml:6: job.fetch_max_records: expected '
                           'an integer ≥ 1, got "2000"\n')


@pytest.mark.parametrize("command", ["worker", "run"])
def test_a_missing_task_class_suggests_the_close_name(tmp_path: Path, command: str) -> None:
    """Checked before the worker (or `sampan run`) opens any system or store."""
    path = _job(tmp_path, '"sum_task:SumTask"', '"sum_task:SumTsk"')
    done = _sampan(command, "job.toml", cwd=tmp_path / "job")
    assert done.returncode == EXIT[command]
    assert done.stderr == (
        f'sampan {command}: error: job.task = "sum_task:SumTsk" in {path}: module "sum_task" '
        f'({path.parent}/sum_task.py) has no attribute "SumTsk"; did you mean '
        '"sum_task:SumTask"?\n')
    assert not (tmp_path / "job" / "data").exists()


def test_a_missing_task_module_names_the_file_it_looked_for(tmp_path: Path) -> None:
    path = _job(tmp_path, '"sum_task:SumTask"', '"sum_tasks:SumTask"')
    done = _sampan("worker", "job.toml", cwd=tmp_path / "job")
    assert done.returncode == EXIT_PERMANENT
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(f'sampan worker: error: job.task = "sum_tasks:SumTask" in '
                                  f'{path}: ')
    assert "sum_tasks" in done.stderr.split(": ", 3)[3]
