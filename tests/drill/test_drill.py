"""`sampan drill` end to end: word count on the local log, expanded 2 → 4 → 8 while it runs."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from drill_cli import run_cli_drill
from kafka_broker import free_port

from framework.drill.options import DrillOptions
from framework.drill.producer import PacedProducer
from framework.drill.run import run_drill
from framework.errors import ConfigError
from framework.systems.base import ProducerRecord
from framework.systems.local.system import LocalSystem
from framework.systems.memory import MemorySystem


def test_drill_cli_is_exact_through_two_expansions(tmp_path: Path) -> None:
    """The README's first command, smaller: exit 0, EXACT, a report and a timeline plot."""
    text = run_cli_drill(tmp_path / "drill", "--records", "6000", "--rate", "3000",
                         "--keys", "300", timeout=240)
    assert "verdict: EXACT — all 300 keys" in text
    assert "expansion local.words 2→4" in text
    assert "expansion local.words 4→8" in text
    assert text.count("workers took it in place (none restarted)") == 2, text


async def test_drill_expansions_restore_nothing_and_keep_order(tmp_path: Path) -> None:
    """Tasks keep their changelog partitions and local stores: expansions restore 0 records."""
    report = await run_drill(DrillOptions(records=4000, keys=200, rate=2000,
                                          output=tmp_path / "d", plot=False))
    assert report.exact, "\n".join(report.verdict.describe())
    assert report.verdict.keys == 200
    assert [e.change for e in report.expansions] == ["local.words 2→4", "local.words 4→8"]
    assert [e.epoch for e in report.expansions] == [2, 3]
    assert [e.restored for e in report.expansions] == [0, 0]
    assert [e.in_place for e in report.expansions] == [True, True]
    for e in report.expansions:
        assert e.requested_ms <= e.detected_ms <= e.resumed_ms
    assert report.timeline is not None  # the plot shows the catch-up: it ends at lag 0
    assert report.timeline.marks[-1][1] == "caught up"
    assert report.timeline.samples[-1].lag == 0
    assert report.timeline.samples[-1].t == report.timeline.marks[-1][0]


async def test_a_drill_is_exact_while_retention_moves_its_inputs_oldest_offsets(
        tmp_path: Path) -> None:
    """Retention of 2 KB per input partition every 500 ms, through expansions 2 → 4 → 8:
    every key exact, and the input really was trimmed under the running job."""
    options = DrillOptions(records=4000, keys=200, rate=2000, output=tmp_path / "r",
                           plot=False, input_retention_bytes=2000)
    report = await run_drill(options)
    assert report.exact, "\n".join(report.verdict.describe())
    assert report.verdict.keys == 200
    system = LocalSystem("local", tmp_path / "r" / "job" / "data")
    spans = await system.offsets("words")
    await system.close()
    assert len(spans) == 8 and sum(span.oldest for span in spans.values()) > 0


async def test_naive_grouper_miscounts(tmp_path: Path) -> None:
    """The plain GroupByPartition grouper moves keys to tasks without their counts (one
    worker, 1 → 2 partitions: the report counts them in words)."""
    report = await run_drill(DrillOptions(records=4000, keys=200, rate=2000, naive=True,
                                          workers=1, initial_partitions=1, steps=(2,),
                                          output=tmp_path / "n", plot=False))
    assert not report.exact
    assert len(report.verdict.wrong) > 50  # about half of the keys move to another task
    text = report.text()
    assert f"verdict: WRONG — {len(report.verdict.wrong)} of 200 keys are wrong" in text
    assert text.startswith("sampan drill — wordcount on local, 1 worker, naive ")
    assert [label for label, _ in report.throughput] == ["at 1 partition", "at 2 partitions"]
    assert "kafka namespace" not in text  # the local log: everything is in the folder


async def test_drill_rejects_bad_options(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--steps must grow from 2 partitions: 2 → 4 → 3"):
        await run_drill(DrillOptions(steps=(4, 3), output=tmp_path / "x"))
    with pytest.raises(ConfigError, match="--steps must grow from 1 partition: 1 → 1"):
        await run_drill(DrillOptions(initial_partitions=1, steps=(1,), output=tmp_path / "w"))
    with pytest.raises(ConfigError, match="--example 'nope': no drillable example"):
        await run_drill(DrillOptions(example="nope", output=tmp_path / "y"))
    with pytest.raises(ConfigError, match=re.escape(
            "--job 'job_x.toml': example 'enrichment' has no such job file; it has: job.toml, "
            "job_broadcast.toml")):
        await run_drill(DrillOptions(example="enrichment", job_file="job_x.toml",
                                     output=tmp_path / "z"))


def test_drill_refuses_a_broker_without_create_partitions(tansu_broker: Any, tmp_path: Path
                                                          ) -> None:
    """tansu lacks CreatePartitions: the drill says so before starting anything."""
    done = subprocess.run(
        [sys.executable, "-m", "framework.cli", "drill", "--system", "kafka", "--bootstrap",
         tansu_broker.bootstrap, "--output", str(tmp_path / "k"), "--no-plot"],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("sampan drill: error: the drill expands its input, but "), last
    assert "CreatePartitions" in last
    assert "--system local" in last
    assert not (tmp_path / "k" / "logs").exists()  # no job was started


def test_a_failed_drill_leaves_no_temporary_folder(tmp_path: Path) -> None:
    """Without --output the drill makes a temporary folder; failing before any job ran (no
    broker answers at its --bootstrap), it removes it again: nothing unnamed left behind."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "framework.cli", "drill", "--system", "kafka", "--bootstrap",
         f"127.0.0.1:{free_port()}", "--no-plot"], capture_output=True, text=True,
        timeout=120, env={**os.environ, "TMPDIR": str(scratch)})
    assert done.returncode == 2, done.stderr
    assert "connection refused" in done.stderr.splitlines()[-1]
    assert list(scratch.iterdir()) == []


async def test_a_producer_behind_its_pace_never_bursts_past_the_expansion_point() -> None:
    """On a busy machine the paced producer catches up in bursts; it stops at `allowed`
    (the drill's next expansion), so the records before and after an expansion are what
    the drill planned however slow the machine (a burst past it left the naive drill with
    nothing to miscount)."""
    system = MemorySystem("local")
    await system.create_stream("words", 2)

    class Words:
        def records(self, count: int) -> list[ProducerRecord]:
            return [ProducerRecord("words", b"w", b"1") for _ in range(count)]

    producer = PacedProducer(system, Words(), records=100, rate=10**9)  # type: ignore[arg-type]
    producer.allowed = 40
    running = asyncio.create_task(producer.run())
    try:
        while producer.produced < 40:
            await asyncio.sleep(0.01)
        for _ in range(5):  # due is far past 100 by now: still 40
            await asyncio.sleep(0.05)
            assert producer.produced == 40
        producer.allowed = 100
        await asyncio.wait_for(running, 30)
    finally:
        running.cancel()
    assert producer.produced == 100
    assert sum(r.end for r in (await system.offsets("words")).values()) == 100
