"""The pure re-key plan: valid task counts, the M-task model, carried checkpoints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sparkjobs import wordcount_job

from framework.config import JobConfig, load_config
from framework.coordinator.builder import build_job_model
from framework.coordinator.holds import Held, InputNow, plan_holds
from framework.metadata import CoordinatorStatus
from framework.metadata.jobmodel import JobModel, StreamHold
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


def _held(config: JobConfig, history: dict[int, dict[int, int]], count: int,
          ends: dict[int, int]) -> tuple[JobModel, dict[str, Held]]:
    """A model holding words at 2 partitions (grown past 2 at offsets 10, 12) and why."""
    hold = StreamHold(count=2, ends={0: 10, 1: 12}, exact=True, refused=3)
    model = build_job_model(config, {"local.words": 2},
                            build_job_model(config, {"local.words": 2}, None),
                            holds={"local.words": hold})
    now = InputNow(count, ends, {2: {0: 10, 1: 12}, **history})
    return model, plan_holds(config, model, {"local.words": count}, {"local.words": now}).held


CAUGHT_UP = {"Partition 0": Checkpoint("Partition 0", 2, {_words(0): 10}),
             "Partition 1": Checkpoint("Partition 1", 2, {_words(1): 12})}


def test_a_held_input_written_at_3_then_6_is_rekeyed_at_3(tmp_path: Path) -> None:
    """The re-keyed model reads words at 3 partitions (the coordinator then expands it to 6
    with a barrier); M must divide 3, and every record before the hold must be read."""
    config = load_config(wordcount_job(tmp_path / "wordcount"))
    model, held = _held(config, {3: {0: 11, 1: 12, 2: 4}}, 6,
                        {0: 12, 1: 12, 2: 4, 3: 0, 4: 1, 5: 0})
    plan = plan_rekey(config, model, {"local.words": 6}, CAUGHT_UP, 3, 2, held=held)
    assert (plan.model.partition_counts, plan.model.holds) == ({"local.words": 3}, {})
    with pytest.raises(RekeyError, match=re.escape(
            "--tasks 2: input local.words is held (local.words 2→3→6) and its records past "
            "the hold were written for 3 partitions; a task count that keeps them exact "
            "divides 3: valid task counts: [1, 3]")):
        plan_rekey(config, model, {"local.words": 6}, CAUGHT_UP, 2, 2, held=held)
    behind = {**CAUGHT_UP, "Partition 1": Checkpoint("Partition 1", 2, {_words(1): 11})}
    with pytest.raises(RekeyError, match=re.escape("still unread in partitions [1]")):
        plan_rekey(config, model, {"local.words": 6}, behind, 3, 2, held=held)


def test_a_held_input_written_at_3_then_4_is_not_rekeyed(tmp_path: Path) -> None:
    """Records of one key at 3 and at 4 partitions lie in unrelated partitions: no
    re-keyed model keeps their order, so the remedy is discard-held."""
    config = load_config(wordcount_job(tmp_path / "wordcount"))
    model, held = _held(config, {3: {0: 11, 1: 12, 2: 4}}, 4, {0: 12, 1: 12, 2: 4, 3: 1})
    with pytest.raises(RekeyError, match=re.escape(
            "input local.words is held (local.words 2→3→4) and the records written past its "
            "hold were written under counts a re-key cannot keep in order per key; release "
            "it with `sampan streams discard-held local.words --job")):
        plan_rekey(config, model, {"local.words": 4}, CAUGHT_UP, 1, 2, held=held)


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
