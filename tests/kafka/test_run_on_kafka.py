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

from framework.config import load_config
from framework.drill.verify import read_stream
from framework.systems import open_system
from framework.systems.base import ProducerRecord

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "wordcount"


def _job(folder: Path, bootstrap: str, name: str) -> Path:
    folder.mkdir()
    (folder / "wordcount_task.py").write_text((EXAMPLE / "wordcount_task.py").read_text())
    path = folder / "job.toml"
    path.write_text(f"""\
[job]
name = "{name}"
task = "wordcount_task:WordCountTask"
inputs = ["kafka.words"]
workers = 2
commit_interval_ms = 200

[coordinator]
monitor_interval_ms = 300

[systems.kafka]
type = "kafka"
bootstrap = "{bootstrap}"

[streams."kafka.words"]
partitions = 2

[streams."kafka.word-counts"]
partitions = 2

[stores.counts]
""")
    return path


async def _produce(path: Path, truth: Counter[str], count: int) -> None:
    config = load_config(path)
    system = open_system(config.system("kafka"))
    await system.start()
    try:
        batch = []
        for n in range(count):
            word = f"w{n % 37}"
            truth[word] += 1
            batch.append(ProducerRecord("words", word.encode(),
                                        json.dumps({"seq": truth[word]}).encode()))
        await system.produce(batch)
    finally:
        await system.close()


async def _outputs(path: Path) -> dict[str, list[dict[str, int]]]:
    config = load_config(path)
    system = open_system(config.system("kafka"))
    await system.start()
    try:
        if "word-counts" not in await system.list_streams():
            return {}
        out: dict[str, list[dict[str, int]]] = {}
        for rows in (await read_stream(system, "word-counts")).values():
            for key, value in rows:
                out.setdefault(key.decode(), []).append(json.loads(value))
        return out
    finally:
        await system.close()


def _wait_for(predicate: Any, timeout: float, what: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert process.poll() is None, f"sampan run exited early while waiting for {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


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
