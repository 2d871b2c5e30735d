"""Two workers' query endpoints in this process over real RocksDB stores and a real local
log, their workers faked (a model, a list of running tasks): the endpoint tests' job; and
the end-to-end tests' querier and the exact check of its answers."""

from __future__ import annotations

import asyncio
import json
import random
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from framework.config import JobConfig, load_config
from framework.config.serdes import get_serde
from framework.metadata import publish_model
from framework.metadata.jobmodel import JobModel, TaskModel
from framework.partitioner import partition_for_key
from framework.queries.client import Answer, Client
from framework.queries.errors import EndpointUnreachableError, TaskUnavailableError
from framework.queries.server import QueryServer
from framework.stores.base import ChangelogPosition
from framework.stores.buffer import TaskStore
from framework.stores.rocksdb import RocksDBEngine
from framework.systems.base import System
from framework.systems.local.system import LocalSystem
from framework.systems.reading import read_range
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


# -- end to end: a querier beside a running job, and the exact check of its answers ------

@dataclass
class Querier:
    """Asks ``client`` for random keys of ``store`` (``name(key)`` the store key; with
    ``max_lag``, a standby copy may answer) until stopped; keeps every answer, and logs
    what it waited, never asserts it."""

    client: Client
    store: str
    keys: list[str]
    name: Callable[[str], str] = str
    max_lag: int | None = None
    answers: list[tuple[str, Answer]] = field(default_factory=list)
    asked: int = 0
    latencies: list[float] = field(default_factory=list)
    unavailable: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Key → its first and last failed query since its last answer."""
    longest_seen: float = 0.0
    """The longest stretch from a key's first to its last failed query before an answer."""
    longest_bound: float = 0.0
    """The longest from a key's first failed query to its next answer (an upper bound:
    keys are sampled)."""
    failures: Counter[str] = field(default_factory=Counter)
    """Why queries failed: each message with its numbers and names blanked, counted."""

    async def run(self, stop: asyncio.Event) -> None:
        rng = random.Random(49)
        while not stop.is_set():
            key = rng.choice(self.keys)
            began = time.monotonic()
            self.asked += 1
            try:
                answer = await self.client.get(self.store, self.name(key),
                                               max_lag=self.max_lag)
            except (TaskUnavailableError, EndpointUnreachableError) as error:
                self.failures[_shape(str(error))] += 1
                first, _ = self.unavailable.get(key, (began, began))
                self.unavailable[key] = (first, began)
                await asyncio.sleep(0.02)
                continue
            now = time.monotonic()
            self.latencies.append(now - began)
            if key in self.unavailable:
                first, last = self.unavailable.pop(key)
                self.longest_seen = max(self.longest_seen, last - first)
                self.longest_bound = max(self.longest_bound, now - first)
            self.answers.append((key, answer))

    def figures(self) -> str:
        ordered = sorted(self.latencies)
        p50 = statistics.median(ordered) * 1000 if ordered else float("nan")
        p99 = ordered[int(len(ordered) * 0.99)] * 1000 if ordered else float("nan")
        return (f"{len(self.answers)} of {self.asked} queries answered "
                f"({len(self.answers) / max(self.asked, 1):.1%}), a key unavailable at "
                f"most {self.longest_seen:.2f}–{self.longest_bound:.2f} s (first to last "
                f"failed query; to its next answer), p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
                f"{self.client.retried} retried, {self.client.stale} stale answers refused, "
                f"{self.client.standby_answers} answered by a standby "
                f"({self.client.standby_refused} standby answers refused); "
                f"failures: {dict(self.failures.most_common(5))}")


def _shape(message: str) -> str:
    return re.sub(r"\d+", "N", re.sub(r"'[^']*'", "'…'", message))


async def changelog_records(system: System, config: JobConfig, store: str
                            ) -> dict[int, list[tuple[int, str, Any]]]:
    """Each partition of ``store``'s changelog: (offset, key, JSON value), in offset order."""
    stream = config.changelog_ref(store).stream
    found: dict[int, list[tuple[int, str, Any]]] = {}
    for partition, offsets in sorted((await system.offsets(stream)).items()):
        rows = found.setdefault(partition, [])
        ssp = SSP(system.name, stream, partition)
        async for batch in read_range(system, ssp, offsets.oldest, offsets.end):
            rows += [(r.offset, (r.key or b"").decode(), json.loads(r.value))
                     for r in batch if r.value is not None]
    return found


def wrong_answers(answers: list[tuple[str, Answer]], model: JobModel,
                  records: Mapping[int, list[tuple[int, str, Any]]],
                  output_values: Mapping[str, set[Any]]) -> list[str]:
    """Every answer checked: its value is its key's last changelog record before the
    answer's position in its task's changelog partition (0/absent when none) — a value the
    key had at a commit — and among the key's output values; per key, never below an
    earlier answer. [] when all are right."""
    partition_of = {t.name: t.changelog_partition for t in model.tasks.values()}
    wrong: list[str] = []
    last: dict[str, Any] = {}
    for key, answer in answers:
        name = str(answer.key)
        if answer.position is None:
            wrong.append(f"{name}: no changelog position in {answer}")
            continue
        history = [v for offset, k, v in records[partition_of[answer.task]]
                   if k == name and offset < answer.position]
        value = answer.value if answer.found else None
        if value != (history[-1] if history else None):
            wrong.append(f"{name}: answered {value} at position {answer.position} of "
                         f"{answer.task}, whose committed value there was "
                         f"{history[-1] if history else None}")
        elif value is not None and value not in output_values.get(key, set()):
            wrong.append(f"{name}: answered {value}, which no output holds")
        elif value is not None and key in last and value < last[key]:
            wrong.append(f"{name}: went back from {last[key]} to {value}")
        if value is not None:
            last[key] = value
    return wrong


def standby_problems(answers: list[tuple[str, Answer]], max_lag: int | None) -> list[str]:
    """What is wrong with a querier's answers as standby reads go: a standby answer only
    with ``max_lag`` and stating a lag within it, and per task no answer (owner's or
    standby's) below a changelog position already answered. [] when nothing is."""
    wrong: list[str] = []
    seen: dict[str, int] = {}
    for _, answer in answers:
        if answer.standby is not None and (
                max_lag is None or answer.lag is None or not 0 <= answer.lag <= max_lag):
            wrong.append(f"{answer.key}: standby {answer.standby} answered with lag "
                         f"{answer.lag}, max_lag {max_lag}")
        if answer.position is None:
            continue
        if answer.position < seen.get(answer.task, -1):
            wrong.append(f"{answer.key}: position {answer.position} of {answer.task} "
                         f"(standby {answer.standby}) after {seen[answer.task]}")
        seen[answer.task] = max(answer.position, seen.get(answer.task, -1))
    return wrong
