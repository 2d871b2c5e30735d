"""`framework.testing`: a task over in-memory input, no broker, no disk."""

from __future__ import annotations

import doctest
import re
from pathlib import Path
from typing import Any

import pytest
from jobs import jobfiles as jf

import framework.testing
from framework import StreamTask
from framework.api import Envelope, load_task_class
from framework.errors import ConfigError
from framework.testing import run_task, run_task_async
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
    path = jf.write_job(tmp_path / "job")
    result = run_task(load_task_class(jf.load(path)), [
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

    path = jf.write_job(tmp_path / "job")
    with pytest.raises(ConfigError, match=re.escape('stream "local.nowhere" is not declared')):
        run_task(Stray, [("local.events", "a", {"amount": 1, "n": 1})], config=path)


async def test_run_task_async_works_inside_a_running_loop() -> None:
    result = await run_task_async(CountTask, [("local.words", "a", 0)], stores={"counts": {}})
    assert result.stores == {"counts": {"a": 1}}


class CommittingSum(StreamTask):
    """Per-key running sums in a store; asks for a commit every third record."""

    def init(self, context: Any) -> None:
        self.totals = context.store("totals")
        self.seen = 0

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        total = self.totals.get(envelope.key, 0) + envelope.value["amount"]
        self.totals.put(envelope.key, total)
        collector.send("local.totals", key=envelope.key, value=total)
        self.seen += 1
        if self.seen % 3 == 0:
            coordinator.commit()


class SumInMemory(CommittingSum):
    """The same sums kept in a dict: state a crash loses, so the replay miscounts."""

    def init(self, context: Any) -> None:
        super().init(context)
        self.memory: dict[str, int] = {}

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        total = self.memory.get(envelope.key, 0) + envelope.value["amount"]
        self.memory[envelope.key] = total
        collector.send("local.totals", key=envelope.key, value=total)
        self.seen += 1
        if self.seen % 3 == 0:
            coordinator.commit()


SUM_INPUTS = [("local.events", f"k{i % 3}", {"amount": i + 1}) for i in range(10)]


def test_a_crash_and_replay_commits_exactly_what_an_uninterrupted_run_does() -> None:
    """Outputs committed before the crash stay, uncommitted ones are lost and made again
    from the restored store: the committed outputs equal an uninterrupted run's, record
    for record, whatever the crash point."""
    clean = run_task(CommittingSum, SUM_INPUTS, stores={"totals": {"k1": 100}})
    expected = [(m.key, m.value) for m in clean.outputs]
    assert expected[:4] == [("k0", 1), ("k1", 102), ("k2", 3), ("k0", 5)]
    assert clean.stores == {"totals": {"k0": 22, "k1": 115, "k2": 18}}
    for point in range(len(SUM_INPUTS) + 1):
        crashed = run_task(CommittingSum, SUM_INPUTS, stores={"totals": {"k1": 100}},
                           crash_after=point)
        assert [(m.key, m.value) for m in crashed.outputs] == expected, point
        assert crashed.stores == clean.stores, point
        assert crashed.crashed_after == point
        replayed = point % 3  # records after the last commit before the crash
        assert crashed.processed == len(SUM_INPUTS) + replayed, point


def test_a_crash_reveals_state_kept_outside_the_stores() -> None:
    clean = run_task(SumInMemory, SUM_INPUTS, stores={"totals": None})
    crashed = run_task(SumInMemory, SUM_INPUTS, stores={"totals": None}, crash_after=5)
    assert clean.last_values("local.totals") == {"k0": 22, "k1": 15, "k2": 18}
    # The replay started from an empty dict at record 3 (the last commit): k0 lost 1.
    assert crashed.last_values("local.totals") == {"k0": 21, "k1": 13, "k2": 15}


def test_crash_after_needs_a_class() -> None:
    with pytest.raises(TypeError, match="crash_after needs the task class"):
        run_task(CommittingSum(), SUM_INPUTS, stores={"totals": None}, crash_after=1)
