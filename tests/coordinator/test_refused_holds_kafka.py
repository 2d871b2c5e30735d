"""A refused partition change on real Apache Kafka, one host: Kafka records no growth, so
the coordinator holds the topic where it saw it at detection (docs/coordinator.md says
what that leaves open); the running workers take the hold in place (same processes) and
read it up to there and no further, on every later count, until `sampan streams
discard-held` skips what was written past it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from polling import poll
from test_run_on_kafka import _job, _outputs, _start

from framework.config import load_config
from framework.metadata import CoordinatorState, read_state
from framework.systems import open_system
from framework.systems.base import ProducerRecord

WORDS = [f"w{n:02d}" for n in range(37)]


class Words:
    """What was produced per word (sequence numbers 1..n) and what a remedy skipped."""

    def __init__(self, path: Path, topic: str) -> None:
        self.path, self.topic = path, topic
        self.sent: dict[str, int] = {}
        self.discarded: set[tuple[str, int]] = set()

    def produce(self, rounds: int) -> list[tuple[str, int]]:
        """``rounds`` records per word, placed by the producer for the topic's count now."""
        made = []
        for _ in range(rounds):
            for word in WORDS:
                self.sent[word] = self.sent.get(word, 0) + 1
                made.append((word, self.sent[word]))
        records = [ProducerRecord(self.topic, w.encode(), json.dumps({"seq": s}).encode())
                   for w, s in made]
        asyncio.run(on_kafka(self.path, lambda system: system.produce(records)))
        return made

    def expected(self) -> dict[str, list[dict[str, int]]]:
        """One output per kept record: the word's counts 1..n with their sequence numbers."""
        kept = {w: [s for s in range(1, n + 1) if (w, s) not in self.discarded]
                for w, n in self.sent.items()}
        return {w: [{"count": c, "seq": s} for c, s in enumerate(seqs, 1)]
                for w, seqs in sorted(kept.items()) if seqs}


async def on_kafka(path: Path, fn: Callable[[Any], Any]) -> Any:
    system = open_system(load_config(path).system("kafka"))
    await system.start()
    try:
        return await fn(system)
    finally:
        await system.close()


def state(path: Path) -> CoordinatorState:
    config = load_config(path)
    return asyncio.run(on_kafka(path, lambda s: read_state(s, config)))  # type: ignore


def read(path: Path, topic: str) -> dict[int, int]:
    config = load_config(path)
    checkpoints = asyncio.run(on_kafka(path, lambda s: s.read_checkpoints(config.name)))
    return {ssp.partition: position for cp in checkpoints.values()
            for ssp, position in cp.inputs.items() if ssp.stream == topic}


def wait_for(predicate: Callable[[], bool], what: str, process: subprocess.Popen[str],
             log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    started = time.monotonic()
    while not predicate():
        assert process.poll() is None, f"sampan run exited waiting for {what}:\n" + (
            log.read_text()[-3000:])
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n" + (
            log.read_text()[-3000:])
        poll(started)


def stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=60) == 0


def test_a_refused_change_on_kafka_holds_the_topic_until_discard_held(
        kafka_broker: Any, tmp_path: Path) -> None:
    unique = f"{os.getpid()}-{time.monotonic_ns() % 10**6}"
    topic, counts = f"held-words-{unique}", f"held-counts-{unique}"
    path = _job(tmp_path / "job", kafka_broker.bootstrap, f"held-{unique}", topic, counts)
    words = Words(path, topic)
    log = tmp_path / "run.log"
    process = _start(path, log)
    try:
        wait_for(lambda: len(state(path).status.worker_pids) == 2, "the workers", process, log)
        pids = state(path).status.worker_pids
        words.produce(5)
        wait_for(lambda: asyncio.run(_outputs(path, counts)) == words.expected(),
                 "the first records counted", process, log)

        asyncio.run(on_kafka(path, lambda s: s.expand_stream(topic, 3)))

        def held() -> bool:
            model = state(path).model
            return model is not None and f"kafka.{topic}" in model.holds
        wait_for(held, "the hold of 2→3", process, log)
        model = state(path).model
        assert model is not None and model.partition_counts[f"kafka.{topic}"] == 2
        hold = dict(model.holds[f"kafka.{topic}"].ends)
        wait_for(lambda: read(path, topic) == hold, "everything before the hold read",
                 process, log)
        before = words.expected()
        skipped = words.produce(3)  # placed for 3 partitions, after detection: held
        asyncio.run(on_kafka(path, lambda s: s.expand_stream(topic, 4)))
        skipped += words.produce(3)  # at 4 partitions, but past the hold: Kafka cannot tell

        def refused_at_4() -> bool:
            refusal = state(path).status.refusal
            return refusal is not None and refusal.counts == {f"kafka.{topic}": 4}
        wait_for(refused_at_4, "the hold kept at 4 partitions", process, log)
        refusal = state(path).status.refusal
        assert refusal is not None and refusal.change == f"kafka.{topic} 2→3→4"
        assert refusal.error.startswith(
            f"kafka.{topic} is held at 2 partitions: records were written past where the job "
            f"stopped reading it when its change to 3 partitions was detected")
        assert read(path, topic) == hold
        assert asyncio.run(_outputs(path, counts)) == before
        taken = state(path)  # the hold placed and kept in place: no worker restarted
        assert (taken.status.worker_pids, taken.status.restarts) == (pids, 0)
        assert taken.model is not None and all(
            (r.pid, r.epoch) == (pids[w], taken.model.epoch) for w, r in taken.workers.items())
        stop(process)

        discard = subprocess.run(
            [sys.executable, "-m", "framework.cli", "streams", "discard-held",
             f"kafka.{topic}", "--job", str(path)], capture_output=True, text=True, timeout=120)
        assert discard.returncode == 0, discard.stderr
        assert discard.stdout.startswith(
            f"discarded {len(skipped)} records of kafka.{topic} (kafka.{topic} 2→3→4):")
        words.discarded.update(skipped)
        process = _start(path, log)
        words.produce(3)
        wait_for(lambda: asyncio.run(_outputs(path, counts)) == words.expected(),
                 "every kept record counted", process, log)
        model = state(path).model
        assert model is not None and model.partition_counts[f"kafka.{topic}"] == 4
        assert model.holds == {}
        stop(process)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
