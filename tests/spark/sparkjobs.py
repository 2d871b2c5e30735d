"""Helpers of the Spark tests: a word-count job copied into tmp_path, produced and run."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from polling import apoll

from framework.config import JobConfig, load_config
from framework.coordinator.process import Coordinator
from framework.drill.verify import read_stream
from framework.metadata import read_latest_model
from framework.systems import open_system
from framework.systems.base import ProducerRecord, System

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def wordcount_job(folder: Path) -> Path:
    """examples/wordcount copied into ``folder``; returns its job file."""
    shutil.copytree(REPO / "examples" / "wordcount", folder,
                    ignore=shutil.ignore_patterns("data", "__pycache__", "state"))
    return folder / "job.toml"


def on_system(config: JobConfig, use: Callable[[System], Awaitable[T]]) -> T:
    """Run ``use`` on the job's local system, opened and closed around it."""

    async def main() -> T:
        system = open_system(config.system("local"))
        try:
            return await use(system)
        finally:
            await system.close()

    return asyncio.run(main())


class Words:
    """Produces words with per-word sequence numbers and remembers the true counts."""

    def __init__(self) -> None:
        self.truth: Counter[str] = Counter()

    def records(self, words: Sequence[str], rounds: int) -> list[ProducerRecord]:
        batch = []
        for _ in range(rounds):
            for word in words:
                self.truth[word] += 1
                value = json.dumps({"seq": self.truth[word]}).encode()
                batch.append(ProducerRecord("words", word.encode(), value))
        return batch

    def produce(self, config: JobConfig, words: Sequence[str], rounds: int) -> None:
        records = self.records(words, rounds)

        async def send(system: System) -> None:
            await system.create_stream("words", 2, exist_ok=True)
            await system.produce(records)

        on_system(config, send)


async def _caught_up(system: System, config: JobConfig) -> bool:
    """Every input partition's end equals the committed position of the task owning it."""
    model = await read_latest_model(system, config)
    if model is None:
        return False
    checkpoints = await system.read_checkpoints(config.name)
    ends = await system.offsets("words")
    if len(ends) != model.partition_counts.get("local.words"):
        return False
    for task in model.tasks.values():
        done = checkpoints[task.name].inputs if task.name in checkpoints else {}
        for ssp in task.ssps:
            if done.get(ssp, 0) != ends[ssp.partition].end:
                return False
    return True


def run_until_caught_up(config: JobConfig, log_dir: Path, *, expand_to: int | None = None,
                        then: Callable[[], None] | None = None, timeout_s: float = 120) -> None:
    """Run the job in-process (coordinator + worker subprocesses) until it processed every
    input record; with ``expand_to``, expand the input once caught up, call ``then`` (to
    produce more) and run until caught up again. Stops the job cleanly."""

    async def main() -> None:
        coordinator = Coordinator(config, log_dir=log_dir)
        task = asyncio.create_task(coordinator.run())
        meta = open_system(config.system("local"))
        try:
            await _wait(lambda: _caught_up(meta, config), timeout_s, task)
            if expand_to is not None:
                await meta.expand_stream("words", expand_to)

                async def adopted() -> bool:
                    model = await read_latest_model(meta, config)
                    return model is not None and model.partition_counts["local.words"] == expand_to

                await _wait(adopted, timeout_s, task)
                if then is not None:
                    await asyncio.to_thread(then)
                await _wait(lambda: _caught_up(meta, config), timeout_s, task)
        finally:
            coordinator.stop.set()
            await asyncio.gather(task, return_exceptions=True)
            await meta.close()
        task.result()

    asyncio.run(main())


async def _wait(check: Callable[[], Awaitable[bool]], timeout_s: float,
                task: asyncio.Task[None]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    started = time.monotonic()
    while not await check():
        if task.done():
            task.result()
            raise AssertionError("the coordinator stopped before the job caught up")
        if loop.time() > deadline:
            raise AssertionError(f"the job did not catch up within {timeout_s} s")
        await apoll(started)


def load(job: Path) -> JobConfig:
    return load_config(job)


def final_state(job: Path) -> tuple[Any, dict[str, int], dict[str, list[dict[str, int]]]]:
    """The job model, the store as the model's changelog partitions hold it, all outputs."""
    config = load_config(job)

    async def read(system: Any) -> tuple[Any, Any, Any]:
        model = await read_latest_model(system, config)
        changelog = config.changelog_stream("counts").partition(".")[2]
        return model, await read_stream(system, changelog), await read_stream(system,
                                                                              "word-counts")

    model, changelog, outputs = on_system(config, read)
    store: dict[str, int] = {}
    for task in model.tasks.values():
        for key, value in changelog.get(task.changelog_partition, []):
            store[key.decode()] = json.loads(value)
    emitted: dict[str, list[dict[str, int]]] = {}
    for rows in outputs.values():
        for key, value in rows:
            emitted.setdefault(key.decode(), []).append(json.loads(value))
    return model, store, emitted
