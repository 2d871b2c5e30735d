"""A job on a Kafka broker: what `sampan run` logs (tansu, which refuses the idempotent
producer), and `sampan status` when the broker stops answering (tansu frozen with
SIGSTOP): the coordinator's record of an unreachable metadata system. An Apache Kafka
broker stopped and started again: tests/faults/test_broker_outage.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka_broker import TansuBroker, start_tansu
from polling import poll

from framework.config import load_config
from framework.coordinator.runfile import read_run_file, run_file

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "framework.cli"]
EXAMPLE = REPO / "examples" / "wordcount"


def _job(folder: Path, bootstrap: str, options: str = "", coordinator: str = "") -> Path:
    """The word count on its own topics; ``options``: the Kafka system's `client_options`
    (an inline table's contents), ``coordinator``: more `[coordinator]` lines."""
    unique = uuid.uuid4().hex[:8]
    folder.mkdir()
    (folder / "wordcount_task.py").write_text(
        (EXAMPLE / "wordcount_task.py").read_text().replace(".word-counts", f".counts-{unique}"))
    path = folder / "job.toml"
    path.write_text(f"""\
[job]
name = "status-{unique}"
task = "wordcount_task:WordCountTask"
inputs = ["kafka.words-{unique}"]
workers = 2
commit_interval_ms = 200

[coordinator]
monitor_interval_ms = 300
max_worker_restarts = 1000
{coordinator}
[systems.kafka]
type = "kafka"
bootstrap = "{bootstrap}"
client_options = {{ {options} }}

[streams."kafka.words-{unique}"]
partitions = 2

[streams."kafka.counts-{unique}"]
partitions = 2

[stores.counts]
""")
    return path


def _sampan(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], input=stdin, capture_output=True, text=True,
                          timeout=120, cwd=REPO)


def _wait_for(predicate: Any, what: str, process: subprocess.Popen[bytes],
              timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    started = time.monotonic()
    while not predicate():
        assert process.poll() is None, f"sampan run exited early while waiting for {what}"
        assert time.monotonic() < deadline, f"timed out after {timeout:g}s waiting for {what}"
        poll(started)


def _start(path: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([*CLI, "run", str(path)], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=REPO)


def _end(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)


def test_a_run_on_kafka_logs_no_subscription_chatter_and_one_producer_notice(
        tansu_broker: TansuBroker, tmp_path: Path) -> None:
    """aiokafka's "Updating subscribed topics" is not logged (the coordinator and every
    worker read end offsets by manual assignment, each a line before); tansu's refusal
    of the idempotent producer is said once per run, and only by commands that produce."""
    path = _job(tmp_path / "job", tansu_broker.bootstrap)
    config = load_config(path)
    words = config.inputs[0]
    log = tmp_path / "run.log"
    process = _start(path, log)
    try:
        _wait_for(lambda: _sampan("status", str(path)).returncode == 0, "a healthy job", process)
        lines = "".join(json.dumps({"key": f"w{n % 7}", "value": {"n": n}}) + "\n"
                        for n in range(50))
        produced = _sampan("streams", "produce", words, str(path), stdin=lines)
        assert produced.returncode == 0, produced.stderr
        assert produced.stderr.count("refused the idempotent producer") == 1
        listed = _sampan("streams", "list", "--job", str(path))
        assert listed.returncode == 0 and words in listed.stdout
        assert "idempotent" not in listed.stderr

        def counted() -> bool:
            document = json.loads(_sampan("status", str(path), "--json").stdout)
            return bool(document["total_lag"] == 0 and all(
                t["ssps"][0]["position"] for t in document["tasks"]))
        _wait_for(counted, "every record counted", process)
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0
    finally:
        _end(process)
    text = log.read_text()
    assert "Updating subscribed topics" not in text
    assert text.count("refused the idempotent producer") == 1, text


@pytest.mark.timeout(600)
def test_a_stopped_broker_is_degraded_then_reachable_again_is_healthy(tmp_path: Path) -> None:
    """The broker holding the job's metadata stops answering (SIGSTOP): the coordinator
    records the outage (run file), and `sampan status` — which cannot read the coordinator
    stream either — reports the job degraded (exit 1), naming the system and since when;
    healthy once it answers again; degraded again once it is stopped for good. (Broker
    calls are bounded by a `timeout_s` of 3 s, not 10: the outage is noticed, and each
    status read of the frozen broker gives up, that much sooner; the lease's JoinGroup,
    which tansu holds up to half the lease's session, waits past `timeout_s`.)"""
    broker = start_tansu(tmp_path)
    process: subprocess.Popen[bytes] | None = None
    try:
        path = _job(tmp_path / "job", broker.bootstrap, "timeout_s = 3",
                    "lease_timeout_ms = 6000\n")
        config = load_config(path)
        process = _start(path, tmp_path / "run.log")
        running = process
        _wait_for(lambda: _sampan("status", str(path)).returncode == 0, "a healthy job", running)
        os.kill(broker.process.pid, signal.SIGSTOP)  # silent: connections hang, data stays
        try:
            def recorded() -> bool:
                run = read_run_file(run_file(config.state_dir))
                return run is not None and [u.system for u in run.unreachable] == ["kafka"]
            _wait_for(recorded, "the coordinator to record the outage", running)
            text = _sampan("status", str(path))
            document = _sampan("status", "--json", "--job", str(path))
        finally:
            os.kill(broker.process.pid, signal.SIGCONT)
        assert (text.returncode, document.returncode) == (1, 1), (text.stdout, text.stderr)
        shown = json.loads(document.stdout)
        assert (shown["state"], shown["health"]) == ("running", "degraded")
        assert shown["coordinator_pid"] == running.pid
        assert shown["problems"][0].startswith("system 'kafka' unreachable since ")
        assert f"Kafka at {broker.bootstrap}" in shown["problems"][0]
        assert text.stdout.startswith(f"job {config.name}: coordinator running on this "
                                      f"machine (pid {running.pid}, since ")
        assert "  health: degraded (exit status 1)\n    system 'kafka' unreachable since " \
            in text.stdout

        def healthy() -> bool:
            return _sampan("status", str(path)).returncode == 0
        _wait_for(healthy, "healthy again once the broker answers", running, timeout=180)
        assert read_run_file(run_file(config.state_dir)).unreachable == []  # type: ignore
        broker.stop()  # gone for good: connections refused
        _wait_for(recorded, "the coordinator to record the broker's end", running)
        gone = _sampan("status", str(path), "--json")
        assert gone.returncode == 1, gone.stderr
        assert json.loads(gone.stdout)["health"] == "degraded"
    finally:
        if process is not None:
            _end(process)
        broker.stop()
