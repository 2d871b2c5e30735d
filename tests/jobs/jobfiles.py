"""The job files of the tests' jobs, written into a folder with their task modules.

The sum job (`write_job`: tests/jobs/sum_task.py on the local log or Kafka, a running sum
per key), the count job (`count_job_text`: tests/coordinator/count_task.py counting
several local inputs), the sum job's expansion variant on Kafka (`kafka_sum_job_text`)
and the windowed_counts example (`windowed_counts_text`).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

from framework.config import JobConfig, load_config

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
COUNT_TASK = REPO / "tests" / "coordinator" / "count_task.py"
EXAMPLE = REPO / "examples" / "windowed_counts"
PARTITIONS = 4
"""Partitions of the sum job's input and output streams (`write_job`)."""


def copy_tasks(folder: Path) -> None:
    """Copy the task modules of tests/jobs (``*_task.py``) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for module in HERE.glob("*_task.py"):
        shutil.copy(module, folder / module.name)


def write_job(
    folder: Path,
    *,
    name: str = "sums",
    system: str = "local",
    bootstrap: str | None = None,
    events: str = "events",
    task: str = "sum_task:SumTask",
    errors: str = "",
    job_extra: str = "",
    client_options: str = "",
) -> Path:
    """A job folder with the sum task and its job file; returns the job file.
    ``client_options`` is the body of the Kafka system's inline table of client options."""
    copy_tasks(folder)
    where = f'bootstrap = "{bootstrap}"' if system == "kafka" else 'path = "data"'
    if client_options:
        where += f"\nclient_options = {{ {client_options} }}"
    path = folder / "job.toml"
    path.write_text(f"""\
[job]
name = "{name}"
task = "{task}"
inputs = ["{system}.{events}"]
commit_interval_ms = 100
fetch_max_records = 2000
{job_extra}
[systems.{system}]
type = "{'kafka' if system == 'kafka' else 'local'}"
{where}

[streams."{system}.{events}"]
partitions = {PARTITIONS}

[streams."{system}.{events}-sums"]
partitions = {PARTITIONS}

[streams."{system}.dead-letters"]

[stores.totals]
{errors}""")
    return path


def load(path: Path) -> JobConfig:
    """The job's config."""
    return load_config(path)


def streams(config: JobConfig) -> tuple[str, str]:
    """The sum job's input stream and its output stream (names inside the system)."""
    events = config.inputs[0].partition(".")[2]
    return events, f"{events}-sums"


def count_job_text(name: str, inputs: Mapping[str, int], *, task: str = "CountTask",
                   workers: int = 2, monitor_ms: int = 300, max_restarts: int = 5,
                   stop_timeout_ms: int = 5000, extra: str = "",
                   model_changes: str = "in-place") -> str:
    """A job file counting ``inputs`` (stream → partitions) into ``local.counts``."""
    streams = "".join(f'[streams."local.{s}"]\npartitions = {n}\n\n' for s, n in inputs.items())
    names = ", ".join(f'"local.{s}"' for s in inputs)
    return f"""\
[job]
name = "{name}"
task = "count_task:{task}"
inputs = [{names}]
workers = {workers}
commit_interval_ms = 100
{extra}
[coordinator]
monitor_interval_ms = {monitor_ms}
worker_stop_timeout_ms = {stop_timeout_ms}
worker_restart_backoff_ms = 100
max_worker_restarts = {max_restarts}
model_changes = "{model_changes}"

[systems.local]
type = "local"
path = "data"

{streams}[streams."local.counts"]
partitions = 2

[stores.counts]
"""


def kafka_sum_job_text(bootstrap: str, name: str, *, store: str = "rocksdb",
                       guarantee: str = "at-least-once", partitions: int = 2,
                       workers: int = 2) -> str:
    """The sum job over ``kafka.<name>-in`` (``partitions``) into ``<name>-in-sums``, its
    ``totals`` store of type ``store`` (the expansion tests on Kafka)."""
    return f"""\
[job]
name = "{name}"
task = "sum_task:SumTask"
inputs = ["kafka.{name}-in"]
workers = {workers}
commit_interval_ms = 100
guarantee = "{guarantee}"

[coordinator]
monitor_interval_ms = 300
worker_stop_timeout_ms = 20000
worker_restart_backoff_ms = 100

[systems.kafka]
type = "kafka"
bootstrap = "{bootstrap}"

[streams."kafka.{name}-in"]
partitions = {partitions}

[streams."kafka.{name}-in-sums"]
partitions = 2

[stores.totals]
type = "{store}"
"""


def windowed_counts_text(*, workers: int, partitions: int) -> str:
    """The windowed_counts example's job file with ``workers`` and ``partitions`` of
    page-views, committing every 100 ms and watching its inputs every 300 ms."""
    text = (EXAMPLE / "job.toml").read_text()
    text = text.replace("workers = 2", f"workers = {workers}")
    text = text.replace("commit_interval_ms = 500", "commit_interval_ms = 100")
    text = text.replace("monitor_interval_ms = 1000", "monitor_interval_ms = 300")
    return text.replace('[streams."local.page-views"]\npartitions = 2',
                        f'[streams."local.page-views"]\npartitions = {partitions}')
