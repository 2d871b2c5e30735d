"""One job, one mode, on Apache Kafka: while a one-host `sampan run` of a job runs, a
`--host` run of it (another state folder, as from another machine) exits 2 naming the
one-host run; while hosts run it, a one-host `sampan run` exits 2 naming the hosts. The
refused runs touch nothing: every output record is there exactly once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from jobs import harness as h
from jobs import jobfiles as jf
from jobs import outputs as out
from jobs.outputs import checkpointed, exact_outputs
from jobs.runs import SumRun
from kafka_broker import KafkaBroker

from framework.systems.kafka.system import KafkaSystem

RECORDS = 6_000
KEYS = 300
CLI = [sys.executable, "-m", "framework.cli"]


def _refused(path: Path, *extra: str) -> str:
    """Run `sampan run path extra...`; it must exit 2 — its one error line."""
    done = subprocess.run([*CLI, "run", str(path), *extra], capture_output=True, text=True,
                          timeout=180, cwd=h.REPO)
    errors = [line for line in done.stderr.splitlines() if line.startswith("sampan run: error: ")]
    assert done.returncode == 2 and len(errors) == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return errors[0]


async def _members(bootstrap: str, group: str) -> int:
    system = KafkaSystem("kafka", bootstrap)
    try:
        return await system.admin.group_members(group) or 0
    finally:
        await system.close()


@pytest.mark.timeout(600)
async def test_a_one_host_run_and_host_runs_of_one_job_refuse_each_other(
        kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    run = SumRun(tmp_path / "job", kafka_broker.bootstrap)
    config = run.config
    job = config.name
    work = out.Workload(KEYS, stream=jf.streams(config)[0])
    meta = await h.open_meta(config)
    host: subprocess.Popen[bytes] | None = None
    try:
        run.start()

        async def healthy() -> bool:
            return run.status()[0] == 0
        await run.wait(healthy, "a healthy one-host run", 180)
        await h.produce(meta, work.records(RECORDS // 2))

        async def committed(target: int) -> bool:
            return await checkpointed(meta, config) >= target
        await run.wait(lambda: committed(RECORDS // 2), "the first half committed", 180)
        pids = run.worker_pids()

        line = await asyncio.to_thread(
            _refused, run.path, "--host", "a", "--data-dir", str(tmp_path / "host-a"))
        assert line == (
            f"sampan run: error: job {job!r} already runs as a one-host `sampan run` (its "
            f"coordinator holds the lease in group __sampan-{job}-coordinators on "
            f"{kafka_broker.bootstrap}); `--host` runs of it would run every task a second "
            f"time. Stop that run first (Ctrl-C, or kill its coordinator), then start the "
            f"hosts (a run that died leaves the group within its session timeout, 10 s)")
        assert await _members(kafka_broker.bootstrap, f"__sampan-{job}-hosts") == 0
        assert run.worker_pids() == pids and run.status()[1]["restarts"] == 0
        assert await run.stop() == 0

        with (tmp_path / "host-a.log").open("ab") as log:
            host = subprocess.Popen(
                [*CLI, "run", str(run.path), "--host", "a", "--data-dir",
                 str(tmp_path / "host-a")], stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, cwd=h.REPO)
        await h.produce(meta, work.records(RECORDS - RECORDS // 2))
        await h.wait_until(lambda: committed(RECORDS), 240, "every input committed by host a",
                           host)
        line = await asyncio.to_thread(_refused, run.path)
        assert line.startswith(
            f"sampan run: error: job {job!r} already runs on several hosts (`sampan run "
            f"--host`: 1 member(s) in group __sampan-{job}-hosts on {kafka_broker.bootstrap}); "
            f"a one-host `sampan run` of it would run every task a second time. Stop every "
            f"host first, or run this one with --host NAME to join them"), line
        assert host.poll() is None
        host.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(host.wait, 120) == 0
        assert await checkpointed(meta, config) == RECORDS
        assert await exact_outputs(meta, config, work) == []
    finally:
        run.kill()
        if host is not None and host.poll() is None:
            os.killpg(host.pid, signal.SIGKILL)
            host.wait(30)
        await meta.close()
    assert "Traceback" not in (tmp_path / "host-a.log").read_text(errors="replace")
