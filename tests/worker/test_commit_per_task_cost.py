"""A commit's cost grows with its tasks, not with their square (`bench.curves tasks`):
building the checkpoints walks the commit's changelog positions once, not once per task.

Real local log, real RocksDB stores; each task's checkpoint still carries exactly its own
changelog position and input offsets.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator
from pathlib import Path
from typing import Any

import pytest

from framework.api import StreamTask
from framework.config import load_config
from framework.coordinator.builder import build_job_model
from framework.metadata import publish_model
from framework.systems.local.system import LocalSystem
from framework.worker.codec import RecordCodec
from framework.worker.commit import Committer
from framework.worker.instance import TaskInstance
from framework.worker.task_stores import open_task_stores

TASKS = 32


class Quiet(StreamTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        """Not called: the test fills the instances' stores itself."""


class CountedPositions(dict[tuple[str, str], int]):
    """Changelog positions that count how many of them were read through ``items``."""

    visits = 0

    def items(self) -> ItemsView[tuple[str, str], int]:
        return _Counted(self)  # type: ignore[return-value]


class _Counted:
    def __init__(self, positions: CountedPositions) -> None:
        self._positions = positions

    def __iter__(self) -> Iterator[tuple[tuple[str, str], int]]:
        for item in dict.items(self._positions):
            self._positions.visits += 1
            yield item


def _job(folder: Path) -> Path:
    folder.mkdir()
    path = folder / "job.toml"
    path.write_text(f"""\
[job]
name = "cost"
task = "t:T"
inputs = ["local.events"]

[systems.local]
type = "local"
path = "data"

[streams."local.events"]
partitions = {TASKS}

[stores.totals]
""")
    return path


async def test_a_commit_reads_each_changelog_position_once_whatever_the_task_count(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = load_config(_job(tmp_path / "job"))
    meta = LocalSystem("local", config.root / "data")
    await meta.start()
    instances: list[TaskInstance] = []
    try:
        await meta.create_stream("events", TASKS)
        model = build_job_model(config, {"local.events": TASKS}, None)
        await meta.create_stream(config.changelog_ref("totals").stream,
                                 model.changelog_partitions, compacted=True)
        model = await publish_model(meta, config, model)
        for task in model.tasks.values():
            opened = await open_task_stores(config, task, None, meta)
            instance = TaskInstance(task.name, Quiet(), task.ssps, opened.stores, config,
                                    {ssp: 7 for ssp in task.ssps})
            instance.stores["totals"].put(f"key of {task.name}", 1)
            instances.append(instance)
        committer = Committer(
            config, {"local": meta}, RecordCodec(config), model.epoch,
            {t.name: t.changelog_partition for t in model.tasks.values()}, {})
        predict = Committer._predict
        made: list[CountedPositions] = []

        def counted(self: Committer, writes: Any) -> CountedPositions:
            made.append(CountedPositions(predict(self, writes)))
            return made[-1]

        monkeypatch.setattr(Committer, "_predict", counted)

        await committer.commit(instances)

        assert [p.visits for p in made] == [TASKS]  # one per (task, store), not TASKS²
        checkpoints = await meta.read_checkpoints(config.name)
        assert sorted(checkpoints) == sorted(model.tasks)
        for task in model.tasks.values():
            assert dict(checkpoints[task.name].changelogs) == {"totals": 1}
            assert dict(checkpoints[task.name].inputs) == {ssp: 7 for ssp in task.ssps}
    finally:
        for instance in instances:
            for store in instance.stores.values():
                store.close()
        await meta.close()
