"""Per-step cost of the worker on the per-key sum job: a py-spy profile folded into steps.

The job, data and settings are `bench.worker`'s (4 partitions, 10k keys, logged RocksDB
store, one output per record). A child process prepares the input, then runs one
`Worker` until every record is processed and committed; py-spy samples only that part
(every thread; idle ones are left out) and each sample is put in the first step of
`STEPS` whose pattern matches a frame of its stack. A step's cost is its samples over the
sampling rate, per record: CPU microseconds per record spent there.

Run: ``.venv/bin/python -m bench.worker_profile --system local`` (or ``kafka``: a tansu
broker started here, or with ``--broker apache-kafka`` the pinned Apache Kafka release);
``--records N``; ``--raw FILE`` keeps py-spy's folded stacks.
Needs ``py-spy`` (``.venv/bin/pip install py-spy``; a dev tool, not a dependency).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from framework.coordinator.supervisor import die_with_parent

STEPS: list[tuple[str, str]] = [
    ("commit: encode outputs", r"RecordCodec\.encode|encode_outputs|_encode_all"),
    ("commit: changelog records", r"changelog_records"),
    ("commit: produce (partition, batch, send)",
     r"send_records|send_rows|kafka/produce\.py|LocalLog\.append|\(.*local/log\.py|"
     r"aiokafka/producer|Placement\."),
    ("commit: apply to RocksDB", r"TaskStore\.apply|RocksDBEngine\.write_batch"),
    ("commit: other", r"Committer\.|checkpoint_to_json"),
    ("task: store get", r"TaskStore\.get"),
    ("task: store put", r"TaskStore\.put"),
    ("task: send", r"TaskInstance\.send"),
    ("task: own code", r"SumTask\.process"),
    ("decode (envelope + serdes)", r"decode_record|decode_batch|RecordCodec\.decode"),
    ("fetch: unpack (aiokafka)", r"aiokafka/record/|_unpack_records|CommittedFilter"),
    ("fetch: records", r"\bfetch(_raw)? \(|read_batch|aiokafka/consumer|getmany"),
    ("loop: dispatch + bookkeeping", r"_dispatch|TaskInstance\.process|_run_loop"),
]
OTHER = "other (event loop, GC, startup of the loop)"


def classify(stack: str) -> str:
    """The step of one folded stack (frames ``func (file:line)`` joined by ``;``)."""
    for step, pattern in STEPS:
        if re.search(pattern, stack):
            return step
    return OTHER


def fold(raw: Path) -> Counter[str]:
    """Samples per step of a py-spy ``--format raw`` file."""
    steps: Counter[str] = Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            steps[classify(stack)] += int(count)
    return steps


@contextlib.contextmanager
def _apache_kafka() -> Iterator[str]:
    from bench.peers.broker import running_kafka

    with running_kafka() as cluster:
        yield cluster.bootstrap


def _child(system: str, records: int, keys: int, broker: str) -> None:
    """The profiled child: its broker (started outside any event loop), then the run."""
    from bench.systems_baseline import tansu

    brokers = {"tansu": tansu, "apache-kafka": _apache_kafka}
    with brokers[broker]() if system == "kafka" else _nothing() as bootstrap:
        asyncio.run(_child_run(system, records, keys, bootstrap))


async def _child_run(system: str, records: int, keys: int, bootstrap: str | None) -> None:
    from bench.worker import _job, _prepare, _records, _run_worker
    from framework.systems import open_system

    work = Path(tempfile.mkdtemp(prefix="sampan-profile-"))
    config = _job(work / system, system, bootstrap)
    meta = open_system(config.system(config.metadata_system))
    await meta.start()
    try:
        model = await _prepare(config, meta, _records(records, keys))
        print("READY", flush=True)
        sys.stdin.readline()  # the parent attached py-spy
        _, elapsed = await _run_worker(config, model, records)
    finally:
        await meta.close()
    shutil.rmtree(work, ignore_errors=True)
    print(f"ELAPSED {elapsed}", flush=True)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *_: object) -> None:
        return None


def profile(system: str, records: int, keys: int, rate: int, raw: Path,
            broker: str = "tansu") -> None:
    """Run the child under py-spy and print the per-step table."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    child = subprocess.Popen(
        [sys.executable, "-m", "bench.worker_profile", "--child", "--system", system,
         "--records", str(records), "--keys", str(keys), "--broker", broker],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parent.parent,
        preexec_fn=die_with_parent)  # SIGTERM if the bench dies
    assert child.stdin is not None and child.stdout is not None
    while (line := child.stdout.readline()) and line.strip() != "READY":
        pass
    spy = subprocess.Popen([py_spy, "record", "--pid", str(child.pid), "--format", "raw",
                            "-r", str(rate), "-o", str(raw), "--nonblocking"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           preexec_fn=die_with_parent)
    time.sleep(1.0)  # py-spy attaches
    child.stdin.write("\n")
    child.stdin.flush()
    elapsed = 0.0
    for line in child.stdout:
        if line.startswith("ELAPSED"):
            elapsed = float(line.split()[1])
    child.wait()
    spy.wait(timeout=60)
    steps = fold(raw)
    total = sum(steps.values())
    per = 1e6 / rate / records
    print(f"{system}: {records:,} records in {elapsed:.2f} s = {records / elapsed:,.0f} "
          f"records/s ({elapsed * 1e6 / records:.2f} us/record wall); {total} samples at "
          f"{rate} Hz, all threads")
    print(f"{'step':45} {'share':>6} {'us/record':>10}")
    for step in [s for s, _ in STEPS] + [OTHER]:
        print(f"{step:45} {steps[step] / total:6.1%} {steps[step] * per:10.2f}")
    print(f"{'total CPU sampled':45} {1:6.1%} {total * per:10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", choices=("local", "kafka"), default="local")
    parser.add_argument("--broker", choices=("tansu", "apache-kafka"), default="tansu",
                        help="the Kafka broker of --system kafka (apache-kafka: the pinned "
                             "release, tests/kafka_broker.py)")
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--raw", type=Path, default=None)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.system, args.records, args.keys, args.broker)
        return
    raw = args.raw or Path(tempfile.gettempdir()) / f"sampan-profile-{os.getpid()}.txt"
    profile(args.system, args.records, args.keys, args.rate, raw, args.broker)


if __name__ == "__main__":
    main()
