"""The pure re-key plan: valid task counts, the M-task model, carried checkpoints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sparkjobs import wordcount_job

from framework.config import load_config
from framework.coordinator.builder import build_job_model
from framework.metadata import CoordinatorStatus
from framework.spark.errors import RekeyError
from framework.spark.rekey_plan import (
    carry_checkpoints,
    check_stopped,
    plan_rekey,
    task_of_key,
    valid_task_counts,
)
from framework.systems.base import Checkpoint
from groupers import SystemStreamPartition as SSP


def _words(p: int) -> SSP:
    return SSP("local", "words", p)


@pytest.mark.parametrize(("counts", "valid"), [
    ({"local.a": 8}, [1, 2, 4, 8]),
    ({"local.a": 8, "local.b": 12}, [1, 2, 4]),
    ({"local.a": 6}, [1, 2, 3, 6]),
    ({"local.a": 7, "local.b": 8}, [1]),
])
def test_valid_task_counts_divide_every_input(counts: dict[str, int], valid: list[int]) -> None:
    assert valid_task_counts(counts) == valid


def test_a_key_goes_to_the_task_of_its_input_partition() -> None:
    keys = [f"word-{n}".encode() for n in range(200)]
    assert all(task_of_key(k, 8, 4) == task_of_key(k, 8, 8) % 4 for k in keys)
    assert sorted({task_of_key(k, 8, 4) for k in keys}) == [0, 1, 2, 3]


def test_plan_for_4_tasks_uses_fresh_changelog_partitions_and_carries_offsets(
        tmp_path: Path) -> None:
    config = load_config(wordcount_job(tmp_path / "wordcount"))
    first = build_job_model(config, {"local.words": 2}, None)
    model = build_job_model(config, {"local.words": 8}, first)
    checkpoints = {
        "Partition 0": Checkpoint("Partition 0", 2, {_words(p): 10 + p for p in (0, 2, 4, 6)},
                                  {"counts": 50}),
        "Partition 1": Checkpoint("Partition 1", 2, {_words(p): 10 + p for p in (1, 3, 5)},
                                  {"counts": 40}),
    }

    plan = plan_rekey(config, model, {"local.words": 8}, checkpoints, 4, 2)
    carried = carry_checkpoints(plan, model, checkpoints, {"counts": {2: 7, 3: 0, 4: 5, 5: 1}})

    assert plan.model.epoch == model.epoch + 1
    assert plan.model.changelog_partitions == 6
    assert plan.old_changelog_partitions == (0, 1)
    assert {t.name: (sorted(s.partition for s in t.ssps), t.changelog_partition, t.worker)
            for t in plan.model.ordered_tasks()} == {
        "Partition 0": ([0, 4], 2, 0), "Partition 1": ([1, 5], 3, 1),
        "Partition 2": ([2, 6], 4, 0), "Partition 3": ([3, 7], 5, 1)}
    assert [(c.task, c.epoch, {s.partition: o for s, o in c.inputs.items()}, dict(c.changelogs))
            for c in carried] == [
        ("Partition 0", 3, {0: 10, 4: 14}, {"counts": 7}),
        ("Partition 1", 3, {1: 11, 5: 15}, {"counts": 0}),
        ("Partition 2", 3, {2: 12, 6: 16}, {"counts": 5}),
        ("Partition 3", 3, {3: 13}, {"counts": 1})]


def test_plan_refuses_when_the_input_expanded_after_the_last_model(tmp_path: Path) -> None:
    config = load_config(wordcount_job(tmp_path / "wordcount"))
    model = build_job_model(config, {"local.words": 2}, None)

    with pytest.raises(RekeyError, match=re.escape(
            "input local.words has 4 partitions but the job model of epoch 1 has 2; run the "
            "job once")):
        plan_rekey(config, model, {"local.words": 4}, {}, 2, 2)


def test_a_stopped_job_passes_and_a_live_coordinator_refuses(tmp_path: Path) -> None:
    import os

    config = load_config(wordcount_job(tmp_path / "wordcount"))
    check_stopped(config, CoordinatorStatus(state="stopped", coordinator_pid=os.getpid()))
    check_stopped(config, CoordinatorStatus())
    with pytest.raises(RekeyError, match="is running"):
        check_stopped(config, CoordinatorStatus(state="running", coordinator_pid=os.getpid(),
                                                worker_pids={0: 999_999_999}))
    with pytest.raises(RekeyError, match="is running"):
        check_stopped(config, CoordinatorStatus(state="stopped", worker_pids={0: os.getpid()}))
