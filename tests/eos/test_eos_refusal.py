"""`guarantee = "exactly-once"` on a broker without transactions (tansu) is refused."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

from jobs import harness as h
from jobs import jobfiles as jf
from kafka_broker import TansuBroker


def test_config_defaults_follow_the_metadata_system(tmp_path: Path) -> None:
    local = jf.load(jf.write_job(tmp_path / "local"))
    kafka = jf.load(jf.write_job(tmp_path / "kafka", system="kafka", bootstrap="127.0.0.1:9"))
    assert (local.guarantee, kafka.guarantee) == ("exactly-once", "at-least-once")


async def test_exactly_once_on_tansu_exits_2_naming_the_broker_and_the_fix(
        tansu_broker: TansuBroker, tmp_path: Path) -> None:
    unique = uuid.uuid4().hex[:8]
    path = jf.write_job(tmp_path / "job", name=f"refuse-{unique}", system="kafka",
                       bootstrap=tansu_broker.bootstrap, events=f"events-{unique}",
                       job_extra='guarantee = "exactly-once"\n')
    config = jf.load(path)
    meta = await h.open_meta(config)
    try:
        await h.prepare(config, meta)
    finally:
        await meta.close()
    with (tmp_path / "worker.log").open("wb") as log:
        worker = h.start_worker(path, log)
        try:
            assert worker.wait(120) == 2
        except subprocess.TimeoutExpired:
            h.kill(worker)
            raise
    text = (tmp_path / "worker.log").read_text()
    error = next(line for line in text.splitlines() if line.startswith("sampan worker: error:"))
    assert 'guarantee = "exactly-once" needs Kafka transactions' in error
    assert tansu_broker.bootstrap in error
    assert 'guarantee = "at-least-once"' in error


def test_sampan_run_refuses_exactly_once_on_tansu_at_start(
        tansu_broker: TansuBroker, tmp_path: Path) -> None:
    """The coordinator refuses before it starts any worker: one line, exit 2."""
    unique = uuid.uuid4().hex[:8]
    path = jf.write_job(tmp_path / "job", name=f"runrefuse-{unique}", system="kafka",
                       bootstrap=tansu_broker.bootstrap, events=f"events-{unique}",
                       job_extra='guarantee = "exactly-once"\n')
    done = subprocess.run([sys.executable, "-m", "framework.cli", "run", str(path)],
                          capture_output=True, text=True, timeout=120, cwd=h.REPO,
                          env={**os.environ, "PYTHONPATH": str(h.REPO)})
    assert done.returncode == 2, done.stderr
    last = done.stderr.splitlines()[-1]
    assert last.startswith('sampan run: error: [job] guarantee = "exactly-once" needs Kafka '
                           'transactions'), last
    assert "started worker" not in done.stderr
