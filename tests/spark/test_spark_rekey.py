"""Offline re-key end to end: word count on 8 partitions with 2 tasks → 4 tasks, exact."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from sparkjobs import Words, final_state, on_system, run_until_caught_up, wordcount_job

from framework.cli import main
from framework.config import load_config
from framework.spark.errors import RekeyError
from framework.spark.rekey import rekey_job
from framework.spark.verify import verify_job

WORDS = [f"word-{n:02d}" for n in range(40)]


def test_rekey_from_2_to_4_tasks_continues_with_exact_counts(tmp_path: Path, spark: Any) -> None:
    job = wordcount_job(tmp_path / "wordcount")
    config = load_config(job)
    words = Words()
    words.produce(config, WORDS, 3)
    run_until_caught_up(config, tmp_path / "logs-1", expand_to=8,
                        then=lambda: words.produce(config, WORDS, 2))

    result = rekey_job(job, 4, spark=spark)

    assert (result.tasks_before, result.tasks_after) == (2, 4)
    assert result.changelog_partitions == {
        "Partition 0": 2, "Partition 1": 3, "Partition 2": 4, "Partition 3": 5}
    assert result.keys == {"counts": 40}
    words.produce(config, WORDS, 4)
    run_until_caught_up(config, tmp_path / "logs-2")

    model, store, emitted = final_state(job)
    assert {name: sorted(s.partition for s in task.ssps) for name, task in model.tasks.items()} \
        == {"Partition 0": [0, 4], "Partition 1": [1, 5], "Partition 2": [2, 6],
            "Partition 3": [3, 7]}
    assert store == {word: 9 for word in WORDS}
    assert {word: [(u["count"], u["seq"]) for u in updates] for word, updates in emitted.items()} \
        == {word: [(n, n) for n in range(1, 10)] for word in WORDS}
    report = verify_job(job, spark)
    assert (report.matched, report.missing, report.extra, report.wrong) == (40, 0, 0, 0)


def test_rekey_refuses_a_task_count_not_dividing_the_partitions(
        tmp_path: Path, spark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    job = wordcount_job(tmp_path / "wordcount")
    config = load_config(job)
    Words().produce(config, WORDS[:4], 1)
    run_until_caught_up(config, tmp_path / "logs", expand_to=8)

    with pytest.raises(RekeyError) as refused:
        rekey_job(job, 3, spark=spark)
    status = main(["rekey", str(job), "--tasks", "3"])

    message = ("--tasks 3 does not divide the 8 partitions of input local.words: every key of "
               "a task must stay co-partitioned; valid task counts: [1, 2, 4, 8]")
    assert str(refused.value) == message
    assert status == 2
    assert capsys.readouterr().err == f"sampan rekey: error: {message}\n"


def test_rekey_refuses_while_the_job_runs(tmp_path: Path, spark: Any) -> None:
    job = wordcount_job(tmp_path / "wordcount")
    config = load_config(job)
    Words().produce(config, WORDS[:2], 1)
    run_until_caught_up(config, tmp_path / "logs")
    from framework.metadata import CoordinatorStatus, publish_status

    async def pretend_running(system: Any) -> None:
        await publish_status(system, config, CoordinatorStatus(
            state="running", coordinator_pid=os.getpid()))

    on_system(config, pretend_running)

    with pytest.raises(RekeyError, match=r"job 'wordcount' is running \(coordinator pid"):
        rekey_job(job, 1, spark=spark)
