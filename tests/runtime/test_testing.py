"""`framework.testing`: a task over in-memory input, no broker, no disk."""

from __future__ import annotations

import doctest
import re
from pathlib import Path
from typing import Any

import pytest
from jobs import harness as h

import framework.testing
from framework import StreamTask
from framework.api import Envelope
from framework.errors import ConfigError
from framework.testing import run_task, run_task_async
from framework.usercode import load_task_class
from groupers import SystemStreamPartition


class CountTask(StreamTask):
    def init(self, context: Any) -> None:
        self.counts = context.store("counts")
        self.name = context.task_name

    async def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        count = (self.counts.get(envelope.key) or 0) + 1
        self.counts.put(envelope.key, count)
        if envelope.value == "commit":
            coordinator.commit()
        if envelope.value == "stop":
            coordinator.shutdown()

    def window(self, collector: Any, coordinator: Any) -> None:
        for key, count in self.counts.all():
            collector.send("local.counts", key=key, value=count)


def test_the_module_doctest_passes() -> None:
    failed, attempted = doctest.testmod(framework.testing)
    assert (failed, attempted > 0) == (0, True)


def test_an_async_task_counts_and_windows_emit_the_store() -> None:
    result = run_task(CountTask, [("local.words", "b", 1), ("local.words", "a", 1),
                                  ("local.words", "b", 1)], stores={"counts": None}, windows=2)
    assert [(m.stream, m.key, m.value) for m in result.outputs] == [
        ("local.counts", "a", 1), ("local.counts", "b", 2),
        ("local.counts", "a", 1), ("local.counts", "b", 2)]
    assert result.stores == {"counts": {"a": 1, "b": 2}}
    assert (result.processed, result.commits, result.shutdown_requested) == (3, 1, False)


def test_a_commit_request_and_a_full_write_buffer_commit_early() -> None:
    inputs = [("local.words", "a", "commit"), ("local.words", "b", 0), ("local.words", "c", 0),
              ("local.words", "d", 0)]
    assert run_task(CountTask, inputs, stores={"counts": None}).commits == 2
    assert run_task(CountTask, inputs, stores={"counts": None},
                    write_buffer_max_keys=2).commits == 3


def test_shutdown_stops_feeding_records() -> None:
    result = run_task(CountTask, [("local.words", "a", 0), ("local.words", "b", "stop"),
                                  ("local.words", "c", 0)], stores={"counts": None}, windows=1)
    assert (result.processed, result.shutdown_requested) == (2, True)
    assert result.stores == {"counts": {"a": 1, "b": 1}}
    assert result.outputs == []  # no window after a shutdown request


def test_envelopes_are_fed_as_given() -> None:
    class Echo(StreamTask):
        def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
            collector.send("local.out", key=envelope.ssp.partition, value=envelope.offset)

    ssp = SystemStreamPartition("local", "in", 3)
    result = run_task(Echo, [Envelope(ssp, 41, "k", "v", 0), ("local.in", "k", "v", 2),
                             ("local.in", "k", "v", 2)])
    assert [(m.key, m.value) for m in result.outputs] == [(3, 41), (2, 0), (2, 1)]


def test_a_job_file_brings_its_stores_and_serdes(tmp_path: Path) -> None:
    """With a job file: declared stores exist, inputs pass through the stream serdes."""
    path = h.write_job(tmp_path / "job")
    result = run_task(load_task_class(h.load(path)), [
        ("local.events", "a", {"amount": 2, "n": 1}),
        ("local.events", "a", {"amount": 3, "n": 2}),
    ], stores={"totals": {"b": 7}}, config=path)
    assert result.last_values("local.events-sums") == {"a": {"sum": 5, "n": 2}}
    assert result.stores == {"totals": {"a": 5, "b": 7}}
    assert not (tmp_path / "job" / "data").exists()
    assert not (tmp_path / "job" / "state").exists()


def test_a_send_to_an_undeclared_stream_fails_with_a_job_file(tmp_path: Path) -> None:
    class Stray(StreamTask):
        def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
            collector.send("local.nowhere", key="k", value=1)

    path = h.write_job(tmp_path / "job")
    with pytest.raises(ConfigError, match=re.escape('stream "local.nowhere" is not declared')):
        run_task(Stray, [("local.events", "a", {"amount": 1, "n": 1})], config=path)


async def test_run_task_async_works_inside_a_running_loop() -> None:
    result = await run_task_async(CountTask, [("local.words", "a", 0)], stores={"counts": {}})
    assert result.stores == {"counts": {"a": 1}}
