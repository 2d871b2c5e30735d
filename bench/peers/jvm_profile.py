"""Where a JVM peer's samples go: a flight recording's execution samples folded into steps.

Record the Kafka Streams peer with the JDK's own profiler (JFR), then fold:

    SAMPAN_BENCH_JVM_OPTIONS="-XX:StartFlightRecording=filename=/tmp/ks.jfr,settings=profile" \\
        .venv/bin/python -m bench.peers throughput --peer kafka-streams \\
        --guarantee at-least-once --rounds 1
    .venv/bin/python -m bench.peers.jvm_profile /tmp/ks.jfr

Each ``jdk.ExecutionSample`` (a Java thread seen running) goes to the step of the
innermost frame of its stack that matches one of `STEPS`, per thread kind (the stream
thread, the producer's network thread, others). JIT compiler and GC threads are native
and never sampled: the bench's second-half CPU figure shows what they cost.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from collections import Counter
from pathlib import Path

__all__ = ["STEPS", "fold"]

STEPS: list[tuple[str, str]] = [
    ("JSON (Jackson)", r"^com\.fasterxml\.jackson\."),
    ("RocksDB (JNI: get, put, write batches, flush)", r"^org\.rocksdb\."),
    ("record cache (ThreadCache, NamedCache)", r"state\.internals\.(ThreadCache|NamedCache|"
                                               r"CachingKeyValueStore)"),
    ("produce: serialise, partition, append (outputs, changelog)",
     r"^org\.apache\.kafka\.clients\.producer\.|RecordCollectorImpl|common\.serialization|"
     r"common\.record\."),
    ("network I/O", r"^(sun\.nio|java\.nio|org\.apache\.kafka\.common\.network)"),
    ("consume: fetch, decompress, deserialise",
     r"^org\.apache\.kafka\.clients\.consumer\.|RecordDeserializer|RecordQueue|SourceNode"),
    ("commit and checkpoint", r"TaskManager\.commit|TaskExecutor\.commit|\.checkpoint|"
                              r"StreamTask\.(prepareCommit|postCommit)|OffsetCheckpoint"),
    ("the task's own code", r"^sampan\.bench\."),
    ("Kafka Streams processing loop", r"^org\.apache\.kafka\.streams\."),
]
OTHER = "other (JDK, logging, metrics)"
FRAME = re.compile(r"^\s+([\w$.]+)\(")
THREAD = re.compile(r'sampledThread = "([^"]*)"')


def _kind(thread: str) -> str:
    if "StreamThread" in thread:
        return "stream thread"
    if "producer-network-thread" in thread:
        return "producer network thread"
    return "other threads"


def step_of(frames: list[str]) -> str:
    """The step of the innermost frame (first in ``frames``) that matches one."""
    for frame in frames:
        for step, pattern in STEPS:
            if re.search(pattern, frame):
                return step
    return OTHER


def fold(text: str) -> dict[str, Counter[str]]:
    """Thread kind → step → samples, from ``jfr print --events jdk.ExecutionSample``."""
    result: dict[str, Counter[str]] = {}
    for event in text.split("jdk.ExecutionSample")[1:]:
        thread = THREAD.search(event)
        frames = [m.group(1) for line in event.splitlines() if (m := FRAME.match(line))]
        kind = _kind(thread.group(1) if thread else "")
        result.setdefault(kind, Counter())[step_of(frames)] += 1
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recording", type=Path)
    args = parser.parse_args()
    text = subprocess.run(["jfr", "print", "--events", "jdk.ExecutionSample",
                           "--stack-depth", "64", str(args.recording)],
                          capture_output=True, text=True, check=True).stdout
    folded = fold(text)
    total = sum(sum(steps.values()) for steps in folded.values())
    print(f"{total} execution samples")
    for kind, steps in sorted(folded.items(), key=lambda item: -sum(item[1].values())):
        count = sum(steps.values())
        print(f"{kind}: {count} samples ({count / total:.0%})")
        for step, samples in steps.most_common():
            print(f"  {step:62} {samples / count:6.1%}")


if __name__ == "__main__":
    main()
