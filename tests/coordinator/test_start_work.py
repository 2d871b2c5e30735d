"""What stands between `sampan run` and the first record, cut down: a worker of a job
without Kafka does not load the Kafka client, and the offsets of a topic created a moment
ago are read at once, not after aiokafka's retry backoff."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from jobs.jobfiles import COUNT_TASK, count_job_text
from kafka_broker import KafkaBroker

from framework.config.sections import SystemConfig
from framework.systems import open_system
from framework.systems.base import OffsetRange

REPO = Path(__file__).resolve().parents[2]


def test_a_prepared_worker_of_a_job_on_the_local_log_loads_no_kafka_client_or_assignor(
        tmp_path: Path) -> None:
    """Started ahead, it imports, connects and waits; told it is not needed, it exits 0 —
    without aiokafka among its imports (80 ms of a start on this VM), nor the assignors."""
    (tmp_path / "count_task.py").write_text(COUNT_TASK.read_text())
    job = tmp_path / "job.toml"
    job.write_text(count_job_text("no-kafka", {"words": 2}))
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "framework.cli", "worker", str(job),
         "--worker", "0", "--wait-for-go"], input="\n", capture_output=True, text=True,
        timeout=300, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    imported = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    assert "framework.worker.runner" in imported  # it did get as far as its go
    assert not {m for m in imported if m.split(".")[0] == "aiokafka"}
    assert not {m for m in imported if m.startswith("groupers.assignors")}


async def test_offsets_of_a_topic_just_created_need_no_stale_metadata_retry(
        kafka_broker: KafkaBroker, caplog: pytest.LogCaptureFixture) -> None:
    """A start creates topics and reads their offsets next (the coordinator stream, the
    fences): the reader learns the new partitions' leaders first, so aiokafka never finds
    one unknown and sleeps its retry backoff."""
    system = open_system(SystemConfig(name="kafka", type="kafka",
                                      bootstrap=kafka_broker.bootstrap,
                                      client_options={"namespace": f"{uuid.uuid4().hex}."}))
    await system.start()
    try:
        with caplog.at_level(logging.DEBUG, logger="aiokafka"):
            for stream in ("first", "second"):
                await system.create_stream(stream, 2)
                ranges = await asyncio.wait_for(system.offsets(stream), 60)
                assert ranges == {0: OffsetRange(0, 0), 1: OffsetRange(0, 0)}
    finally:
        await system.close()
    retried = [r.getMessage() for r in caplog.records
               if "unknown for fetching offset" in r.getMessage()]
    assert retried == []
