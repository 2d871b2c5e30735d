"""An exception raised by `process()` (or `init()`) under each `errors.process_policy`."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from jobs import harness as h
from jobs import jobfiles as jf
from jobs import outputs as out

from framework.drill.verify import read_stream
from framework.errors import ProcessingError
from framework.systems.base import ProducerRecord, System
from groupers import SystemStreamPartition

TASK = "fragile_task:FragileTask"
BOOM = {"amount": 100, "n": 3, "explode": True}


def _records() -> list[ProducerRecord]:
    """Key "k" gets amounts 1, 2, (100, exploding), 3, 4 on partition 0; key "other" gets 7."""
    values = [{"amount": 1, "n": 1}, {"amount": 2, "n": 2}, BOOM, {"amount": 3, "n": 3},
              {"amount": 4, "n": 4}]
    records = [ProducerRecord("events", b"k", json.dumps(v).encode(), partition=0)
               for v in values]
    return [ProducerRecord("events", b"other", b'{"amount": 7, "n": 1}', partition=0),
            *records]


async def _outputs(meta: System) -> dict[str, list[tuple[int, int]]]:
    """Per key, its outputs as (sum, n) in order."""
    found: dict[str, list[tuple[int, int]]] = {}
    for rows in (await read_stream(meta, "events-sums")).values():
        for k, v in rows:
            found.setdefault(k.decode(), []).append((json.loads(v)["sum"], json.loads(v)["n"]))
    return found


EXPECTED = {"k": [(1, 1), (3, 2), (6, 3), (10, 4)], "other": [(7, 1)]}


async def _run(tmp_path: Path, errors: str) -> tuple[System, h.WorkerResult]:
    config = jf.load(jf.write_job(tmp_path / "job", task=TASK, errors=errors))
    meta = await h.open_meta(config)
    model = await h.prepare(config, meta)
    await meta.produce(_records())
    _, result = await h.run_worker(config, model, 6)
    return meta, result


async def test_fail_policy_stops_naming_task_ssp_offset_error_and_the_fix(tmp_path: Path) -> None:
    config = jf.load(jf.write_job(tmp_path / "job", task=TASK))
    meta = await h.open_meta(config)
    try:
        model = await h.prepare(config, meta)
        await meta.produce(_records())
        with pytest.raises(ProcessingError) as caught:
            await h.run_worker(config, model, 6)
        assert str(caught.value) == (
            "task 'Partition 0' failed on local.events[0] offset 3: RuntimeError: boom on k "
            "(fragile_task.py:21 in process); fix the task and restart (the record is "
            "processed again from the last commit), or set [errors] process_policy = "
            '"skip" or "dead-letter" to move past such records')
        assert await out.output_count(meta, config) == 0
        assert await meta.read_checkpoints(config.name) == {}
    finally:
        await meta.close()


async def test_skip_policy_undoes_the_failed_call_and_moves_on(tmp_path: Path) -> None:
    """The exploding record's store writes, output and commit request leave no trace."""
    meta, result = await _run(tmp_path, '\n[errors]\nprocess_policy = "skip"\n')
    try:
        assert (result.processed, result.skipped) == (5, 1)
        assert await _outputs(meta) == EXPECTED
        config = jf.load(tmp_path / "job" / "job.toml")
        assert await out.changelog_state(meta, config) == {"other": 7, "k": 10}
        checkpoint = (await meta.read_checkpoints(config.name))["Partition 0"]
        assert checkpoint.inputs[SystemStreamPartition("local", "events", 0)] == 6
        assert (await read_stream(meta, "dead-letters")) == {0: []}
    finally:
        await meta.close()


async def test_dead_letter_policy_writes_the_record_and_the_traceback(tmp_path: Path) -> None:
    meta, result = await _run(tmp_path, '\n[errors]\nprocess_policy = "dead-letter"\n'
                                        'dead_letter_stream = "local.dead-letters"\n')
    try:
        assert (result.processed, result.skipped) == (5, 1)
        assert await _outputs(meta) == EXPECTED
        [(key, value)] = (await read_stream(meta, "dead-letters"))[0]
        letter = json.loads(value)
        assert key == b"k"
        trace = letter.pop("traceback")
        assert trace.startswith("Traceback (most recent call last):")
        assert trace.rstrip().endswith("RuntimeError: boom on k")
        assert 'fragile_task.py", line 21, in process' in trace
        del letter["timestamp"]
        assert letter == {
            "kind": "process", "task": "Partition 0", "system": "local", "stream": "events",
            "partition": 0, "offset": 3, "error": "RuntimeError: boom on k",
            "key_base64": base64.b64encode(b"k").decode(),
            "value_base64": base64.b64encode(json.dumps(BOOM).encode()).decode()}
    finally:
        await meta.close()


async def test_an_exception_in_init_is_a_one_line_error(tmp_path: Path) -> None:
    config = jf.load(jf.write_job(tmp_path / "job", task=TASK, name="broken-init"))
    meta = await h.open_meta(config)
    try:
        model = await h.prepare(config, meta)
        with pytest.raises(ProcessingError) as caught:
            await h.run_worker(config, model, 1)
        assert str(caught.value).startswith(
            "task 'Partition 0': init() raised RuntimeError: cannot reach the enrichment table "
            "(fragile_task.py:11 in init); fix the task's init and restart")
    finally:
        await meta.close()


async def test_an_init_error_exits_the_worker_process_with_one_line(tmp_path: Path) -> None:
    path = jf.write_job(tmp_path / "job", task=TASK, name="broken-init")
    config = jf.load(path)
    meta = await h.open_meta(config)
    try:
        await h.prepare(config, meta)
        with (tmp_path / "worker.log").open("ab") as log:
            worker = h.start_worker(path, log)
            try:
                async def exited() -> bool:
                    return worker.poll() is not None
                await h.wait_until(exited, 60, "the worker to stop on init()")
            finally:
                h.kill(worker)
        assert worker.returncode == 2
        text = (tmp_path / "worker.log").read_text()
        assert "Traceback" not in text
        assert [line for line in text.splitlines() if "error:" in line] == [
            "sampan worker: error: task 'Partition 0': init() raised RuntimeError: cannot "
            "reach the enrichment table (fragile_task.py:11 in init); fix the task's init and "
            "restart"]
    finally:
        await meta.close()
