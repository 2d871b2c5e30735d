"""A task that overrides `StreamTask.process_batch` gets each fetched batch of a partition
in one call, on a real worker over the local log on disk: the same outputs, store and
checkpoint as `process` record by record; an exception names the record the call was
at; a call that leaves records stops the worker; the skip policy and bad records still
go record by record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jobs import harness as h
from jobs import jobfiles as jf
from jobs import outputs as out

from framework.drill.verify import read_stream
from framework.errors import ProcessingError
from framework.systems.base import ProducerRecord, System
from framework.worker.policies import UndecodableRecordError
from groupers import SystemStreamPartition

TASKS = '''\
from framework import StreamTask
from framework.api import Envelope


class BatchSumTask(StreamTask):
    """The per-key sum, record by record or a batch at a time; counts its calls."""

    calls = {"process": 0, "process_batch": 0, "records": 0}

    def init(self, context):
        self.totals = context.store("totals")

    def process(self, envelope, collector, coordinator):
        BatchSumTask.calls["process"] += 1
        self.add(envelope, collector, coordinator)

    def process_batch(self, envelopes, collector, coordinator):
        BatchSumTask.calls["process_batch"] += 1
        for envelope in envelopes:
            BatchSumTask.calls["records"] += 1
            self.add(envelope, collector, coordinator)

    def add(self, envelope, collector, coordinator):
        total = (self.totals.get(envelope.key) or 0) + envelope.value["amount"]
        self.totals.put(envelope.key, total)
        collector.send("local.events-sums", key=envelope.key,
                       value={"sum": total, "n": envelope.value["n"]})
        if envelope.value.get("explode"):
            self.totals.delete("other")
            coordinator.commit()
            raise RuntimeError(f"boom on {envelope.key}")


class HalfBatchTask(BatchSumTask):
    """Takes the first two records of a batch and returns."""

    def process_batch(self, envelopes, collector, coordinator):
        for _, envelope in zip(range(2), envelopes):
            self.add(envelope, collector, coordinator)


class ColumnsSumTask(BatchSumTask):
    """Takes its batches as columns (`ColumnarBatch.columns`), as the windows do."""

    def process_batch(self, envelopes, collector, coordinator):
        BatchSumTask.calls["process_batch"] += 1
        ssp, offsets, keys, values, stamps = envelopes.columns()
        for offset, key, value, stamp in zip(offsets, keys, values, stamps):
            BatchSumTask.calls["records"] += 1
            try:
                self.add(Envelope(ssp, offset, key, value, stamp), collector, coordinator)
            except BaseException:
                envelopes.failed_at(offset)
                raise


class AsyncBatchTask(BatchSumTask):
    async def process_batch(self, envelopes, collector, coordinator):
        BatchSumTask.calls["process_batch"] += 1
        for envelope in envelopes:
            self.add(envelope, collector, coordinator)
'''
BOOM = {"amount": 100, "n": 3, "explode": True}
EXPECTED = {"k": [(1, 1), (3, 2), (6, 3), (10, 4)], "other": [(7, 1)]}


def _records(values: list[dict[str, object] | bytes]) -> list[ProducerRecord]:
    """Key "other" with 7 first, then key "k" with ``values``, all on partition 0."""
    return [ProducerRecord("events", b"other", b'{"amount": 7, "n": 1}', partition=0),
            *[ProducerRecord("events", b"k", v if isinstance(v, bytes) else
                             json.dumps(v).encode(), partition=0) for v in values]]


GOOD = [{"amount": 1, "n": 1}, {"amount": 2, "n": 2}, {"amount": 3, "n": 3},
        {"amount": 4, "n": 4}]


async def _outputs(meta: System) -> dict[str, list[tuple[int, int]]]:
    """Per key, its committed outputs as (sum, n) in order."""
    found: dict[str, list[tuple[int, int]]] = {}
    for rows in (await read_stream(meta, "events-sums")).values():
        for k, v in rows:
            found.setdefault(k.decode(), []).append((json.loads(v)["sum"], json.loads(v)["n"]))
    return found


async def _run(tmp_path: Path, task: str, records: list[ProducerRecord], count: int,
               errors: str = "") -> tuple[System, h.WorkerResult, dict[str, int]]:
    """The job with ``task`` over ``records`` until ``count`` are processed or skipped:
    (metadata system, the worker's result, the task's call counts)."""
    path = jf.write_job(tmp_path / "job", task=f"batch_task:{task}", errors=errors)
    (path.parent / "batch_task.py").write_text(TASKS)
    config = jf.load(path)
    meta = await h.open_meta(config)
    model = await h.prepare(config, meta)
    await meta.produce(records)
    worker, result = await h.run_worker(config, model, count)
    task_object = next(i.task for i in worker.instances if i.name == "Partition 0")
    return meta, result, dict(type(task_object).calls)


async def test_a_batch_task_gets_whole_batches_and_commits_what_process_would(
        tmp_path: Path) -> None:
    meta, result, calls = await _run(tmp_path, "BatchSumTask", _records(GOOD), 5)
    try:
        config = jf.load(tmp_path / "job" / "job.toml")
        assert await _outputs(meta) == EXPECTED
        assert await out.changelog_state(meta, config) == {"other": 7, "k": 10}
        checkpoint = (await meta.read_checkpoints(config.name))["Partition 0"]
        assert checkpoint.inputs[SystemStreamPartition("local", "events", 0)] == 5
        assert result.processed == 5 and calls["records"] == 5 and calls["process"] == 0
        assert 1 <= calls["process_batch"] < 5  # more than one record per call
    finally:
        await meta.close()


async def test_an_async_process_batch_is_awaited(tmp_path: Path) -> None:
    meta, result, calls = await _run(tmp_path, "AsyncBatchTask", _records(GOOD), 5)
    try:
        assert await _outputs(meta) == EXPECTED and result.processed == 5
        assert calls["process"] == 0 and calls["process_batch"] >= 1
    finally:
        await meta.close()


@pytest.mark.parametrize("task", ["BatchSumTask", "ColumnsSumTask"])
async def test_a_batch_task_as_envelopes_or_columns_commits_what_process_would(
        tmp_path: Path, task: str) -> None:
    meta, result, calls = await _run(tmp_path, task, _records(GOOD), 5)
    try:
        config = jf.load(tmp_path / "job" / "job.toml")
        assert await _outputs(meta) == EXPECTED
        assert await out.changelog_state(meta, config) == {"other": 7, "k": 10}
        checkpoint = (await meta.read_checkpoints(config.name))["Partition 0"]
        assert checkpoint.inputs[SystemStreamPartition("local", "events", 0)] == 5
        assert result.processed == 5 and calls["records"] == 5 and calls["process"] == 0
    finally:
        await meta.close()


@pytest.mark.parametrize("task", ["BatchSumTask", "ColumnsSumTask"])
async def test_a_record_it_cannot_decode_stops_a_batch_task_after_committing_those_before(
        tmp_path: Path, task: str) -> None:
    """``errors.policy = "fail"``: as record by record, the records before the bad one
    are processed and committed, none after it, and the checkpoint is the bad record's
    offset (a reset to offset + 1 skips exactly it) — whether the task takes envelopes
    or columns."""
    with pytest.raises(UndecodableRecordError, match=r"local\.events\[0\] offset 3"):
        await _run(tmp_path, task, _records([*GOOD[:2], b"{not json", *GOOD[2:]]), 6)
    config = jf.load(tmp_path / "job" / "job.toml")
    meta = await h.open_meta(config)
    try:
        assert await _outputs(meta) == {"k": [(1, 1), (3, 2)], "other": [(7, 1)]}
        assert await out.changelog_state(meta, config) == {"other": 7, "k": 3}
        checkpoint = (await meta.read_checkpoints(config.name))["Partition 0"]
        assert checkpoint.inputs[SystemStreamPartition("local", "events", 0)] == 3
    finally:
        await meta.close()


@pytest.mark.parametrize("task", ["BatchSumTask", "ColumnsSumTask"])
async def test_a_failing_batch_names_the_record_it_was_at(tmp_path: Path, task: str) -> None:
    with pytest.raises(ProcessingError) as caught:
        await _run(tmp_path, task, _records([*GOOD[:2], BOOM, *GOOD[2:]]), 6)
    assert str(caught.value) == (
        "task 'Partition 0' failed on local.events[0] offset 3: RuntimeError: boom on k "
        "(batch_task.py:31 in add); fix the task and restart (the record is processed "
        "again from the last commit), or set [errors] process_policy = \"skip\" or "
        "\"dead-letter\" to move past such records")
    config = jf.load(tmp_path / "job" / "job.toml")
    meta = await h.open_meta(config)
    try:
        assert await out.output_count(meta, config) == 0
        assert await meta.read_checkpoints(config.name) == {}
    finally:
        await meta.close()


async def test_a_batch_call_that_leaves_records_stops_the_worker(tmp_path: Path) -> None:
    with pytest.raises(ProcessingError) as caught:
        await _run(tmp_path, "HalfBatchTask", _records(GOOD), 5)
    assert str(caught.value).startswith(
        "task 'Partition 0' failed on local.events[0] offset 2: its process_batch returned "
        "before taking that record (and any after it)")


async def test_under_the_skip_policy_a_batch_task_is_called_per_record(
        tmp_path: Path) -> None:
    """`process` runs, so the exploding record's writes, output and commit request are
    undone alone and the records around it count."""
    meta, result, calls = await _run(
        tmp_path, "BatchSumTask", _records([*GOOD[:2], BOOM, *GOOD[2:]]), 6,
        '\n[errors]\nprocess_policy = "skip"\n')
    try:
        assert (result.processed, result.skipped) == (5, 1)
        assert await _outputs(meta) == EXPECTED
        assert calls["process_batch"] == 0 and calls["process"] == 6
    finally:
        await meta.close()


@pytest.mark.parametrize("task", ["BatchSumTask", "ColumnsSumTask"])
async def test_a_bad_record_in_a_batch_follows_the_errors_policy(tmp_path: Path,
                                                                 task: str) -> None:
    meta, result, calls = await _run(
        tmp_path, task, _records([*GOOD[:2], b"{not json", *GOOD[2:]]), 6,
        '\n[errors]\npolicy = "skip"\n')
    try:
        assert (result.processed, result.skipped) == (5, 1)
        assert await _outputs(meta) == EXPECTED
        checkpoint = (await meta.read_checkpoints(
            jf.load(tmp_path / "job" / "job.toml").name))["Partition 0"]
        assert checkpoint.inputs[SystemStreamPartition("local", "events", 0)] == 6
        assert calls["process"] == 0 and calls["records"] == 5
    finally:
        await meta.close()
