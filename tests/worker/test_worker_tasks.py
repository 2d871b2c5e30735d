"""What the worker does with a task's own behaviour: store writes from `window`, exceptions."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from jobs import harness as h
from jobs import jobfiles as jf
from jobs import outputs as out

from framework.errors import ProcessingError
from framework.systems.base import ProducerRecord
from framework.worker.runner import Worker


async def test_store_writes_made_only_by_window_are_committed(tmp_path: Path) -> None:
    """No input at all: the window's store writes still reach the changelog."""
    config = jf.load(jf.write_job(tmp_path / "job", task="tick_task:TickTask",
                                job_extra="window_interval_ms = 20\n"))
    meta = await h.open_meta(config)
    try:
        model = await h.prepare(config, meta)
        worker = Worker(config, 0, model=model)
        running = asyncio.create_task(worker.run())
        try:
            async def ticked() -> bool:
                return (await out.changelog_state(meta, config)).get("ticks", 0) >= 3

            await h.wait_until(ticked, 30, "three committed window ticks per task")
        finally:
            worker.stop.set()
            await running
    finally:
        await meta.close()


async def test_a_task_exception_stops_the_worker_naming_task_ssp_and_offset(
        tmp_path: Path) -> None:
    config = jf.load(jf.write_job(tmp_path / "job", task="tick_task:TickTask"))
    meta = await h.open_meta(config)
    try:
        model = await h.prepare(config, meta)
        await meta.produce([ProducerRecord("events", b"k", json.dumps({"amount": a}).encode(),
                                           partition=1) for a in (5, -2, 7)])
        with pytest.raises(ProcessingError) as caught:
            await h.run_worker(config, model, 3)
        message = str(caught.value)
        assert message.startswith("task 'Partition 1' failed on ")
        assert "offset 1: ValueError: negative amount -2 (tick_task.py:12 in process)" in message
        assert "the record is processed again from the last commit" in message
        assert await meta.read_checkpoints(config.name) == {}
    finally:
        await meta.close()
