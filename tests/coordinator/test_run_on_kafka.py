"""`sampan run` end to end on a real Kafka-protocol broker (tansu on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from polling import poll

from framework.config import load_config
from framework.drill.verify import read_stream
from framework.systems import open_system
from framework.systems.base import ProducerRecord

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "wordcount"


def _job(folder: Path, bootstrap: str, name: str, words: str = "words",
         counts: str = "word-counts") -> Path:
    """The word count job on its own topics ``words`` → ``counts``."""
    folder.mkdir()
    (folder / "wordcount_task.py").write_text(
        (EXAMPLE / "wordcount_task.py").read_text().replace(".word-counts", f".{counts}"))
    path = folder / "job.toml"
    path.write_text(f"""\
[job]
name = "{name}"
task = "wordcount_task:WordCountTask"
inputs = ["kafka.{words}"]
workers = 2
commit_interval_ms = 200

[coordinator]
monitor_interval_ms = 300

[systems.kafka]
type = "kafka"
bootstrap = "{bootstrap}"

[streams."kafka.{words}"]
partitions = 2

[streams."kafka.{counts}"]
partitions = 2

[stores.counts]
""")
    return path


async def _produce(path: Path, truth: Counter[str], count: int, topic: str = "words") -> None:
    config = load_config(path)
    system = open_system(config.system("kafka"))
    await system.start()
    try:
        batch = []
        for n in range(count):
            word = f"w{n % 37}"
            truth[word] += 1
            batch.append(ProducerRecord(topic, word.encode(),
                                        json.dumps({"seq": truth[word]}).encode()))
        await system.produce(batch)
    finally:
        await system.close()


async def _outputs(path: Path, topic: str = "word-counts") -> dict[str, list[dict[str, int]]]:
    config = load_config(path)
    system = open_system(config.system("kafka"))
    await system.start()
    try:
        if topic not in await system.list_streams():
            return {}
        out: dict[str, list[dict[str, int]]] = {}
        for rows in (await read_stream(system, topic)).values():
            for key, value in rows:
                out.setdefault(key.decode(), []).append(json.loads(value))
        return out
    finally:
        await system.close()


def _wait_for(predicate: Any, timeout: float, what: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + timeout
    started = time.monotonic()
    while not predicate():
        assert process.poll() is None, f"sampan run exited early while waiting for {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        poll(started)


def test_run_counts_exactly_on_kafka(kafka_broker: Any,
                                                         tmp_path: Path) -> None:
    """Coordinator + 2 workers on tansu: every word's last output equals the truth, in order."""
    path = _job(tmp_path / "job", kafka_broker.bootstrap, f"wc-{os.getpid()}")
    log = (tmp_path / "run.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "framework.cli", "run", str(path)], stdout=log,
        stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        truth: Counter[str] = Counter()
        _wait_for(lambda: "started worker 1" in (tmp_path / "run.log").read_text(), 60,
                  "the workers", process)
        asyncio.run(_produce(path, truth, 1500))
        asyncio.run(_produce(path, truth, 1500))

        def done() -> bool:
            out = asyncio.run(_outputs(path))
            return sum(len(v) for v in out.values()) >= 3000

        _wait_for(done, 90, "3,000 outputs", process)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()
    outputs = asyncio.run(_outputs(path))
    assert {w: v[-1]["count"] for w, v in outputs.items()} == dict(truth)
    for updates in outputs.values():  # no crash: nothing repeated, nothing reordered
        assert [u["count"] for u in updates] == list(range(1, len(updates) + 1))
        assert [u["seq"] for u in updates] == list(range(1, len(updates) + 1))


def _start(path: Path, log_path: Path) -> subprocess.Popen[str]:
    log = log_path.open("a")
    try:
        return subprocess.Popen([sys.executable, "-m", "framework.cli", "run", str(path)],
                                stdout=log, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
    finally:
        log.close()


def test_one_coordinator_per_job_on_kafka(kafka_broker: Any, tmp_path: Path) -> None:
    """The lease is membership of the job's coordinators' group: a second `sampan run`
    exits 2 naming the first (on the same state folder its lock says so first); once the
    first is SIGKILLed, Kafka expires it and the next `sampan run` takes the job over;
    counts stay exact."""
    words, counts = f"lease-words-{os.getpid()}", f"lease-counts-{os.getpid()}"
    path = _job(tmp_path / "job", kafka_broker.bootstrap, f"lease-{os.getpid()}", words, counts)
    path.write_text(path.read_text().replace("monitor_interval_ms = 300",
                                             "monitor_interval_ms = 300\nlease_timeout_ms = 6000"))
    first = _start(path, tmp_path / "first.log")
    processes = [first]
    try:
        truth: Counter[str] = Counter()
        _wait_for(lambda: "started worker 1" in (tmp_path / "first.log").read_text(), 90,
                  "the first coordinator's workers", first)
        same = subprocess.run([sys.executable, "-m", "framework.cli", "run", str(path)],
                              capture_output=True, text=True, timeout=120)
        assert same.returncode == 2, same.stderr  # this machine, this state folder: the lock
        assert f"with state folder {tmp_path / 'job' / 'state' / f'lease-{os.getpid()}'} " \
            in same.stderr
        assert f"(sampan run, pid {first.pid}); stop that one first" in same.stderr
        elsewhere = path.with_name("elsewhere.toml")  # as from another machine: the lease
        elsewhere.write_text(path.read_text().replace("[job]\n", '[job]\ndata_dir = "other"\n',
                                                      1))
        second = subprocess.run([sys.executable, "-m", "framework.cli", "run", str(elsewhere)],
                                capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, second.stderr
        last = second.stderr.splitlines()[-1]
        assert last.startswith(f"sampan run: error: job 'lease-{os.getpid()}' is already "
                               f"running: its coordinator is pid {first.pid} on host "), last
        assert "started worker" not in second.stderr
        asyncio.run(_produce(path, truth, 500, words))

        def counted(total: int) -> Any:
            return lambda: sum(map(len, asyncio.run(_outputs(path, counts)).values())) >= total

        _wait_for(counted(500), 90, "500 outputs", first)
        os.kill(first.pid, signal.SIGKILL)  # its workers get SIGTERM and commit
        first.wait(30)
        third = _start(path, tmp_path / "third.log")
        processes.append(third)
        _wait_for(lambda: "started worker 1" in (tmp_path / "third.log").read_text(), 120,
                  "the next coordinator to take over", third)
        asyncio.run(_produce(path, truth, 500, words))
        _wait_for(counted(1000), 90, "1,000 outputs", third)
        third.send_signal(signal.SIGINT)
        assert third.wait(timeout=60) == 0
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    outputs = asyncio.run(_outputs(path, counts))
    assert {w: v[-1]["count"] for w, v in outputs.items()} == dict(truth)
    for updates in outputs.values():  # at-least-once: never short, never out of order
        counts = [u["count"] for u in updates]
        assert counts == sorted(counts) and counts[-1] == len(set(counts))
