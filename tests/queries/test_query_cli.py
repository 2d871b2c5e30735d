"""`sampan query`: a key's value, a scan's lines, the owner, JSON, and its exit codes,
against two workers' endpoints (tests/queries/queryjobs.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from queryjobs import JOB_FILE, TASKS, WORDS, Job, start_job, stop

from framework.cli import main
from framework.partitioner import partition_for_key


@pytest.fixture
async def job(tmp_path: Path) -> AsyncIterator[Job]:
    started = await start_job(tmp_path)
    for task in TASKS:
        started.commit(task, {w: i for i, w in enumerate(WORDS, 1)
                              if started.task_of(w) == task}, 3)
    yield started
    await stop(started)


async def sampan(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`sampan ARGV` in a thread (it runs its own event loop); exit status and output."""
    status = await asyncio.to_thread(main, list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


async def test_a_key_prints_its_value(job: Job, capsys: pytest.CaptureFixture[str]) -> None:
    assert await sampan(capsys, "query", str(job.config.path), "counts", "word-7") == (
        0, "8\n", "")


async def test_a_key_without_a_value_exits_1_saying_so(
        job: Job, capsys: pytest.CaptureFixture[str]) -> None:
    assert await sampan(capsys, "query", str(job.config.path), "counts", "nope") == (
        1, "", "store 'counts' has no key 'nope'\n")


async def test_json_prints_the_whole_answer(job: Job,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = await sampan(capsys, "query", str(job.config.path), "counts", "word-7",
                                  "--json")
    assert status == 0
    assert json.loads(out) == {"key": "word-7", "found": True, "value": 8,
                               "task": job.task_of("word-7"), "epoch": 1, "position": 3}


async def test_a_prefix_prints_every_entry_in_key_order(
        job: Job, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = await sampan(capsys, "query", str(job.config.path), "counts",
                                  "--prefix", "word-1")
    expected = sorted((w, i) for i, w in enumerate(WORDS, 1) if w.startswith("word-1"))
    assert (status, out) == (0, "".join(f"{w}\t{i}\n" for w, i in expected))


async def test_a_range_with_a_limit_prints_the_first_entries(
        job: Job, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = await sampan(capsys, "query", str(job.config.path), "counts",
                                  "--range", "word-2", "word-3", "--limit", "3", "--json")
    expected = sorted((w, i) for i, w in enumerate(WORDS, 1) if "word-2" <= w < "word-3")[:3]
    assert (status, json.loads(out)) == (0, [{"key": w, "value": i} for w, i in expected])


async def test_owner_prints_where_the_key_lives(job: Job,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    task = job.task_of("word-7")
    worker = TASKS.index(task)
    assert await sampan(capsys, "query", str(job.config.path), "counts", "word-7",
                        "--owner") == (
        0, f"task {task} (partition {partition_for_key(b'word-7', 4)} of local.words), "
        f"worker {worker} at {job.servers[worker].url}, epoch 1\n", "")


async def test_a_store_not_keyed_like_an_input_is_an_error_naming_the_fix(
        job: Job, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = await sampan(capsys, "query", str(job.config.path), "unkeyed", "a")
    assert status == 2
    assert err.startswith("sampan query: error: store 'unkeyed' of job 'wc' does not "
                          "declare how its keys are partitioned")
    assert 'add keyed_by = "local.words" to [stores.unkeyed]' in err


async def test_a_key_and_a_scan_together_are_refused(
        job: Job, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = await sampan(capsys, "query", str(job.config.path), "counts", "a",
                                  "--prefix", "b")
    assert (status, err) == (
        2, "sampan query: error: give KEY, or --prefix P, or --range A B (one of them)\n")


async def test_a_job_without_queries_is_an_error_naming_the_fix(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "off" / "job.toml"
    path.parent.mkdir()
    path.write_text(JOB_FILE.replace("enabled = true", "enabled = false"))
    status, _, err = await sampan(capsys, "query", str(path), "counts", "a")
    assert (status, err) == (2, "sampan query: error: job 'wc' does not answer queries; add "
                                f"[queries] enabled = true to {path} and restart it (`sampan "
                                "run`)\n")
