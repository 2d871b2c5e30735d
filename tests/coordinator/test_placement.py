"""Restore-gap-aware placement: the high-availability assignor uses workers' local state."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from jobs.jobfiles import count_job_text
from jobs.outputs import keys
from jobs.runs import CountJob

from framework.config import load_config
from framework.coordinator.builder import build_job_model
from framework.coordinator.model_service import ModelService


def _ha_config(tmp_path: Path, workers: int = 2):  # type: ignore[no-untyped-def]
    text = count_job_text("ha", {"words": 4}, workers=workers).replace(
        "max_worker_restarts = 5", 'max_worker_restarts = 5\nassignor = "high-availability"')
    path = tmp_path / "job.toml"
    path.write_text(text)
    return load_config(path)


def _workers(model) -> dict[str, int]:  # type: ignore[no-untyped-def]
    return {name: task.worker for name, task in sorted(model.tasks.items())}


def test_tasks_follow_the_workers_that_hold_their_state(tmp_path: Path) -> None:
    """Reported local state beats the previous placement when the old holder has none."""
    config = _ha_config(tmp_path)
    first = build_job_model(config, {"local.words": 4}, None)
    assert _workers(first) == {"Partition 0": 0, "Partition 1": 1, "Partition 2": 0,
                               "Partition 3": 1}
    swapped = {0: {"Partition 1": 0, "Partition 3": 0}, 1: {"Partition 0": 0, "Partition 2": 0}}
    second = build_job_model(config, {"local.words": 4}, first, local_state=swapped)
    assert _workers(second) == {"Partition 0": 1, "Partition 1": 0, "Partition 2": 1,
                                "Partition 3": 0}
    # Changelog partitions never move with the placement.
    assert {n: t.changelog_partition for n, t in second.tasks.items()} == {
        n: t.changelog_partition for n, t in first.tasks.items()}


def test_a_new_worker_without_state_takes_no_active_task_yet(tmp_path: Path) -> None:
    """A task moves only to a caught-up worker: an empty newcomer gets none (it would need a
    full restore), where sticky would hand it one at once."""
    first = build_job_model(_ha_config(tmp_path), {"local.words": 4}, None)
    wider = _ha_config(tmp_path, workers=3)
    caught_up = {0: {"Partition 0": 0, "Partition 2": 0}, 1: {"Partition 1": 0, "Partition 3": 0}}
    second = build_job_model(wider, {"local.words": 4}, first, local_state=caught_up)
    assert _workers(second) == _workers(first)
    # A gap beyond acceptable_recovery_lag (10,000) makes the holder not caught up either.
    behind = {0: {"Partition 0": 50_000, "Partition 2": 0},
              1: {"Partition 1": 0, "Partition 3": 0}, 2: {"Partition 0": 0}}
    third = build_job_model(wider, {"local.words": 4}, first, local_state=behind)
    assert third.tasks["Partition 0"].worker == 2


async def test_workers_report_store_positions_the_coordinator_turns_into_gaps(
        make_job: Callable[..., CountJob]) -> None:
    """A real run: worker reports carry their stores' changelog offsets; gaps are 0 after a
    clean stop and grow by exactly what the changelog gained since."""
    job = make_job("ha", {"words": 4})
    job.path.write_text(job.path.read_text().replace(
        "max_worker_restarts = 5", 'max_worker_restarts = 5\nassignor = "high-availability"'))
    job.config = load_config(job.path)
    await job.create("words", 4)
    await job.produce("words", keys(20), 3)
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    assert await job.stop() == 0
    state = await job.state()
    held = {w: sorted(r.store_positions) for w, r in state.workers.items()}
    assert held == {0: ["Partition 0", "Partition 2"], 1: ["Partition 1", "Partition 3"]}
    padded = await job.pad_changelog(2, 7)  # 7 changelog records the workers never saw
    assert padded
    service = ModelService(job.config)
    await service.open()
    try:
        gaps = await service.local_state(state.model)
    finally:
        await service.close()
    assert gaps == {0: {"Partition 0": 0, "Partition 2": 7}, 1: {"Partition 1": 0,
                                                                  "Partition 3": 0}}


def test_new_tasks_never_reuse_a_retired_changelog_partition(tmp_path: Path) -> None:
    """After a re-key moved tasks 0–3 to changelog partitions 4–7 (0–3 retired), a task
    added later (a new 5-partition input) gets 8, not the free-looking 0."""
    first = build_job_model(_ha_config(tmp_path), {"local.words": 4}, None)
    rekeyed = dataclasses.replace(first, tasks={
        name: dataclasses.replace(task, changelog_partition=task.changelog_partition + 4)
        for name, task in first.tasks.items()}, changelog_partitions=8)
    (tmp_path / "two").mkdir()
    path = tmp_path / "two" / "job.toml"
    path.write_text(count_job_text("ha", {"words": 4, "extra": 5}))
    grown = build_job_model(load_config(path), {"local.words": 4, "local.extra": 5}, rekeyed)
    assert {n: t.changelog_partition for n, t in grown.tasks.items()} == {
        "Partition 0": 4, "Partition 1": 5, "Partition 2": 6, "Partition 3": 7,
        "Partition 4": 8}
    assert grown.changelog_partitions == 9
