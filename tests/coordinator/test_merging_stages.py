"""Which passed expansion stages a new job model keeps for the merge window
(`TaskModel.merging`): a worker that starts a task — a restart, a failover — merges their
new partitions in record time as the worker that passed them did. Pure: no processes."""

from __future__ import annotations

from pathlib import Path

import pytest
from jobs.jobfiles import count_job_text

from framework.config import JobConfig, load_config
from framework.coordinator.builder import build_job_model
from framework.metadata.jobmodel import BarrierStage, JobModel
from framework.systems.base import Checkpoint
from groupers import SystemStreamPartition

WORDS = "local.words"
WINDOW = 300_000
"""`job.expansion_merge_ms` at its default."""


def ssp(partition: int) -> SystemStreamPartition:
    return SystemStreamPartition("local", "words", partition)


@pytest.fixture
def config(tmp_path: Path) -> JobConfig:
    path = tmp_path / "job.toml"
    path.write_text(count_job_text("merging", {"words": 2}))
    return load_config(path)


def build(config: JobConfig, count: int, previous: JobModel, now_ms: int,
          done: dict[int, int]) -> JobModel:
    """The next model at ``now_ms`` with ``count`` partitions, every input partition having
    ended at offset 10 and task ``Partition 1`` checkpointed at ``done`` (partition →
    offset)."""
    return build_job_model(
        config, {WORDS: count}, previous, now_ms=now_ms,
        end_offsets={ssp(p): 10 for p in range(count)},
        checkpoints={"Partition 1": Checkpoint("Partition 1", previous.epoch,
                                               {ssp(p): o for p, o in done.items()})})


def test_a_passed_stage_is_kept_for_the_merge_window_then_dropped(config: JobConfig) -> None:
    """2 → 4 at t=2 s adds a stage stamped 2 s; once the checkpoint passed it, later models
    keep it under ``merging`` until 2 s + the window, and not from then on."""
    first = build_job_model(config, {WORDS: 2}, None, now_ms=1_000)
    grown = build(config, 4, first, 2_000, {})
    stage = BarrierStage({ssp(1): 10}, frozenset({ssp(3)}), at_ms=2_000)
    assert grown.tasks["Partition 1"].stages == (stage,)
    assert grown.tasks["Partition 1"].merging == ()
    not_yet = build(config, 4, grown, 3_000, {1: 9})
    assert (not_yet.tasks["Partition 1"].stages, not_yet.tasks["Partition 1"].merging) == (
        (stage,), ())
    passed = build(config, 4, grown, 3_000, {1: 10})
    assert (passed.tasks["Partition 1"].stages, passed.tasks["Partition 1"].merging) == (
        (), (stage,))
    assert build(config, 4, passed, 2_000 + WINDOW - 1, {1: 10}).tasks[
        "Partition 1"].merging == (stage,)
    assert build(config, 4, passed, 2_000 + WINDOW, {1: 10}).tasks[
        "Partition 1"].merging == ()


def test_two_expansions_keep_their_stages_in_order(config: JobConfig) -> None:
    """2 → 4 → 8: the first stage passed while the second waits, then both passed — the
    merges a starting worker rebuilds are the first's, then the second's."""
    first = build_job_model(config, {WORDS: 2}, None, now_ms=1_000)
    four = build(config, 4, first, 2_000, {})
    eight = build(config, 8, four, 2_500, {1: 10})
    early = BarrierStage({ssp(1): 10}, frozenset({ssp(3)}), at_ms=2_000)
    late = BarrierStage({ssp(1): 10, ssp(3): 10}, frozenset({ssp(5), ssp(7)}), at_ms=2_500)
    assert (eight.tasks["Partition 1"].stages, eight.tasks["Partition 1"].merging) == (
        (late,), (early,))
    both = build(config, 8, eight, 3_000, {1: 10, 3: 10})
    assert (both.tasks["Partition 1"].stages, both.tasks["Partition 1"].merging) == (
        (), (early, late))
    assert JobModel.from_bytes(both.to_bytes()) == both


def test_a_model_without_merges_keeps_its_bytes(config: JobConfig) -> None:
    """A stage without a time and a task without merges serialize as before the fields
    existed: older models read back equal, and equal plans stay equal bytes."""
    first = build_job_model(config, {WORDS: 2}, None)
    grown = build(config, 4, first, 0, {})
    task = grown.to_json()["tasks"][1]
    assert task["stages"] == [{"barrier": [["local", "words", 1, 10]],
                               "held": [["local", "words", 3]]}]
    assert "merging" not in task
    assert JobModel.from_bytes(grown.to_bytes()) == grown
