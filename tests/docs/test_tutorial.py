"""docs/tutorial.md, run as written: its files, its commands, its printed outputs."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from framework.api import load_task_class
from framework.config import load_config

REPO = Path(__file__).resolve().parents[2]
TUTORIAL = REPO / "docs" / "tutorial.md"
CLI = [sys.executable, "-m", "framework.cli"]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def blocks() -> list[str]:
    return re.findall(r"```\w*\n(.*?)```", TUTORIAL.read_text(), flags=re.S)


def block(marker: str) -> str:
    """The code block whose first line is ``marker``."""
    found = [b for b in blocks() if b.startswith(marker + "\n")]
    assert len(found) == 1, f"docs/tutorial.md: expected one block starting {marker!r}"
    return found[0]


def after(command: str) -> str:
    """The output block printed right after the bash block containing ``command``."""
    found = blocks()
    index = next(i for i, b in enumerate(found) if command in b)
    return found[index + 1]


def produced_lines(command: str) -> str:
    """The JSON lines a `printf … | sampan streams produce` block of the tutorial writes."""
    bash = next(b for b in blocks() if command in b)
    return "".join(line + "\n" for line in re.findall(r"'(\{[^']*\})'", bash))


def sampan(folder: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run([*CLI, *args], input=stdin, capture_output=True, text=True,
                          cwd=folder, env=ENV, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def tail(folder: Path) -> list[str]:
    """The job's outputs so far; none while `sampan run` has not created its streams yet
    (on a loaded machine the tail can come first)."""
    done = subprocess.run([*CLI, "streams", "tail", "local.view-counts", "--job", "views.toml",
                           "--from-beginning", "--until-end"], capture_output=True, text=True,
                          cwd=folder, env=ENV, timeout=120)
    if done.returncode == 2 and "stream local.view-counts does not exist" in done.stderr:
        return []
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def per_key(lines: list[str]) -> dict[str, list[tuple[str, str]]]:
    """Key → its (partition, value) outputs in offset order: what the job guarantees (how
    outputs of different keys interleave in a partition depends on fetch order)."""
    rows = sorted((int(p), int(o), k, v) for p, o, k, v in (line.split("\t") for line in lines))
    found: dict[str, list[tuple[str, str]]] = {}
    for partition, _, key, value in rows:
        found.setdefault(key, []).append((str(partition), value))
    return found


def wait_for_lines(folder: Path, count: int, timeout: float = 90) -> list[str]:
    deadline = time.monotonic() + timeout
    while len(lines := tail(folder)) < count:
        assert time.monotonic() < deadline, f"only {len(lines)} of {count} outputs: {lines}"
        time.sleep(0.2)
    return lines


def queried(folder: Path, shown: str, *args: str) -> str:
    """`sampan query views.toml views ARGS…`'s output, asked again until it is ``shown``
    (or 60 s passed): an output is visible once its commit landed, the store's committed
    value a moment later, when the worker applies the commit."""
    deadline = time.monotonic() + 60
    while (out := sampan(folder, "query", "views.toml", "views", *args)) != shown:
        if time.monotonic() > deadline:
            return out
        time.sleep(0.2)
    return out


FILES = ("views_pipeline.py", "views.toml", "test_views.py", "views_task.py",
         "views-task.toml", "test_forms.py", "views-kafka.toml")
"""Every file the tutorial writes."""


def write_files(folder: Path) -> None:
    for name in FILES:
        (folder / name).write_text(block(f"# {name}"))


def test_the_unit_tests_of_the_tutorial_pass(tmp_path: Path) -> None:
    """The pipeline's test (step 4) and the test that its task does the same (step 9)."""
    write_files(tmp_path)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "test_views.py", "test_forms.py"], capture_output=True, text=True,
                          cwd=tmp_path, env=ENV, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


def test_the_tutorial_teaches_the_pipeline_first_and_the_task_underneath() -> None:
    text = TUTORIAL.read_text()
    order = [text.index(heading) for heading in (
        "## 2. Write a pipeline", "# views_pipeline.py", "## 9. The layer underneath: a task",
        "# views_task.py")]
    assert order == sorted(order)
    assert 'pipeline = "views_pipeline:build"' in block("# views.toml")
    assert 'pipeline = "views_pipeline:build"' in block("# views-kafka.toml")


def test_the_unit_test_step_installs_pytest_first() -> None:
    """The tutorial's setup installs sampan only: the step that runs pytest installs it."""
    step = next(b for b in blocks() if "pytest -q test_views.py" in b)
    assert step.index("pip install -q pytest") < step.index("pytest -q test_views.py")


def test_the_kafka_job_file_is_valid_and_keeps_its_own_state(tmp_path: Path) -> None:
    write_files(tmp_path)
    config = load_config(tmp_path / "views-kafka.toml")
    assert config.system("kafka").bootstrap == "127.0.0.1:9092"
    assert config.inputs == ("kafka.page-views",)  # the pipeline's names, on Kafka
    assert config.changelog_stream("views") == "kafka.views-kafka-views-changelog"
    assert config.state_dir != load_config(tmp_path / "views.toml").state_dir
    assert config.state_dir != load_config(tmp_path / "views-task.toml").state_dir
    load_task_class(config)
    load_task_class(load_config(tmp_path / "views-task.toml"))


def test_the_job_runs_and_expands_as_the_tutorial_shows(tmp_path: Path) -> None:
    write_files(tmp_path)
    with (tmp_path / "run.log").open("ab") as out:
        run = subprocess.Popen([*CLI, "run", "views.toml"], stdout=out, stderr=out,
                               cwd=tmp_path, env=ENV, start_new_session=True)
    try:
        sampan(tmp_path, "streams", "produce", "local.page-views", "--job", "views.toml",
               stdin=produced_lines('"value": {"page": "/pricing"}}\' \\\n'))
        shown = after("| sampan streams produce local.page-views --job views.toml\nsampan "
                      "streams tail")
        first = wait_for_lines(tmp_path, 5)
        assert per_key(first) == per_key(shown.splitlines())

        sampan(tmp_path, "streams", "expand", "local.page-views", "--partitions", "4",
               "--job", "views.toml")
        sampan(tmp_path, "streams", "produce", "local.page-views", "--job", "views.toml",
               stdin=produced_lines('"value": {"page": "/blog"}}'))
        shown = after('{"key": "gus", "value": {"page": "/blog"}}')
        second = wait_for_lines(tmp_path, 9)
        assert per_key(second) == per_key(shown.splitlines())
        value, *entries = after("sampan query views.toml views ana\n").splitlines(True)
        assert queried(tmp_path, value, "ana") == value == "3\n"
        assert queried(tmp_path, "".join(entries), "--range", "a", "h") == "".join(entries)
        status = sampan(tmp_path, "status", "views.toml")
        assert status.startswith("job views: epoch 2 (expansion local.page-views 2→4)")
        assert f"worker logs: {tmp_path / 'state' / 'views' / 'logs'}/worker-N.log" in status
        run.send_signal(signal.SIGINT)
        assert run.wait(60) == 0
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(30)
