"""A task added in place starts reading every input its newest model gives it — also a
partition gained by a model taken while its stores were still restoring (the worker read
its start positions at the older model; a route over the task then found no position for
the new partition and the worker crashed with a KeyError)."""

from __future__ import annotations

from pathlib import Path

from framework.config import parse_config
from framework.metadata.jobmodel import TaskModel
from framework.systems.base import Checkpoint, ProducerRecord
from framework.systems.local.system import LocalSystem
from framework.worker.tasks import Tasks
from groupers import SystemStreamPartition as SSP


async def test_a_partition_gained_while_the_task_was_added_starts_at_its_first_record(
        tmp_path: Path) -> None:
    config = parse_config({
        "job": {"name": "j", "task": "m:T", "inputs": ["local.a"]},
        "systems": {"local": {"type": "local", "path": "data"}},
        "streams": {"local.a": {"partitions": 4}},
    }, tmp_path / "j.toml")
    local = LocalSystem("local", tmp_path / "data")
    await local.create_stream("a", 4)
    await local.produce([ProducerRecord("a", b"k", b"1", partition=p) for p in (1, 3)] * 3)
    tasks = Tasks(config, {"local": local}, lambda: False)
    added_at = TaskModel("Partition 1", frozenset({SSP("local", "a", 1)}), 1, 0)
    start = await tasks.open_added(added_at)
    try:
        assert start[2] == {SSP("local", "a", 1): 0}
        newest = TaskModel("Partition 1", frozenset({SSP("local", "a", 1), SSP("local", "a", 3)}),
                           1, 0)
        checkpoint = Checkpoint("Partition 1", 1, inputs={SSP("local", "a", 1): 2})
        assert await tasks.completed_start(newest, checkpoint, {SSP("local", "a", 1): 2}) == {
            SSP("local", "a", 1): 2, SSP("local", "a", 3): 0}
        unchanged = {SSP("local", "a", 1): 2}
        assert await tasks.completed_start(added_at, None, unchanged) is unchanged
    finally:
        for store in start[1].stores.values():
            store.close()
        await local.close()
