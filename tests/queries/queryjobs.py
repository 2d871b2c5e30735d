"""Two workers' query endpoints in this process over real RocksDB stores and a real local
log, their workers faked (a model, a list of running tasks): the endpoint tests' job."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from framework.config import JobConfig, load_config
from framework.jobmodel import JobModel, TaskModel
from framework.metadata import publish_model
from framework.partitioner import partition_for_key
from framework.queries.server import QueryServer
from framework.serdes import get_serde
from framework.stores.base import ChangelogPosition
from framework.stores.buffer import TaskStore
from framework.stores.rocksdb import RocksDBEngine
from framework.systems.local.system import LocalSystem
from groupers import SystemStreamPartition as SSP

WORDS = [f"word-{i}" for i in range(40)]
TASKS = ("Partition 0", "Partition 1")


@dataclass
class FakeTask:
    name: str
    stores: dict[str, Any]


@dataclass
class FakeWorker:
    """What a worker shows its endpoint: its id, model and running tasks."""

    worker_id: int
    model: JobModel | None
    instances: list[FakeTask] = field(default_factory=list)


@dataclass
class Job:
    config: JobConfig
    system: LocalSystem
    workers: list[FakeWorker]
    servers: list[QueryServer]
    stores: dict[str, TaskStore]

    def task_of(self, word: str) -> str:
        return f"Partition {partition_for_key(word.encode(), 4) % 2}"

    def commit(self, task: str, values: Mapping[str, int], position: int) -> None:
        store = self.stores[task]
        for key, value in values.items():
            store.put(key, value)
        store.apply(store.drain(), ChangelogPosition("wc-counts-changelog", 0, position))


JOB_FILE = """\
[job]
name = "wc"
task = "m:T"
inputs = ["local.words"]
workers = 2

[systems.local]
type = "local"
path = "log"

[streams."local.words"]

[stores.counts]
keyed_by = "local.words"

[stores.unkeyed]

[queries]
enabled = true
"""


def config_of(tmp_path: Path, queries: Mapping[str, str] | None = None) -> JobConfig:
    """The job file (written to ``tmp_path``, for the CLI too) with ``queries`` keys."""
    extra = "".join(f"{key} = {value}\n" for key, value in (queries or {}).items())
    (tmp_path / "job.toml").write_text(JOB_FILE + extra)
    return load_config(tmp_path / "job.toml")


def model_of(config: JobConfig) -> JobModel:
    """Two tasks of an input that grew 2 → 4: task p reads partitions p and p + 2."""
    tasks = {f"Partition {p}": TaskModel(
        f"Partition {p}", frozenset({SSP("local", "words", p), SSP("local", "words", p + 2)}),
        p, p) for p in (0, 1)}
    return JobModel("wc", 1, config.digest, 2, tasks, partition_counts={"local.words": 4})


async def start_job(tmp_path: Path, queries: Mapping[str, str] | None = None) -> Job:
    config = config_of(tmp_path, queries)
    system = LocalSystem("local", tmp_path / "log")
    await system.start()
    model = await publish_model(system, config, model_of(config))
    serde = get_serde("string")
    stores = {task: TaskStore("counts", RocksDBEngine(tmp_path / "stores" / task),
                              serde, get_serde("json"), task=task) for task in TASKS}
    workers = [FakeWorker(w, model, [FakeTask(TASKS[w], {"counts": stores[TASKS[w]]})])
               for w in (0, 1)]
    servers = [QueryServer(config, worker, system) for worker in workers]
    for server in servers:
        await server.start()
    return Job(config, system, workers, servers, stores)


async def stop(job: Job) -> None:
    for server in job.servers:
        await server.close()
    for store in job.stores.values():
        store.close()
    await job.system.close()
