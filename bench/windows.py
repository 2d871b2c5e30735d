"""Windowing benchmark: tumbling, hopping and session window counts, several results per
window, and an interval join, each against the plain per-key sum, in interleaved rounds.

Every job runs one `Worker` (in this process; with ``--worker process``, in its own) on
the local log over the same records: 4 input partitions, 4 tasks, one logged RocksDB
store, 10k keys, JSON values. The records carry
an event time (the record timestamp) advancing 3.6 ms per record — 1M records span an
hour of event time, so every key sees about 100 records — with a random delay of up to
5 s (the grace is 10 s, so nothing is late). Timed from the worker's start until every
record is processed and committed.

- sum: ``totals[key] += amount``, one output per record (bench/worker.py's job);
- tumbling: `Windows` with `Tumbling(60 s)` and `count()`, one output per closed window;
- hopping: `Hopping(5 min, 1 min)`, `count()`;
- hopping ×4: the same windows with ``aggregate(views=count(), spent=sum_of("amount"),
  top=max_of("amount"), avg=mean_of("amount"))``;
- session: `Session(gap 30 s)`, `count()`;
- join: `IntervalJoin` of two inputs (the records alternate between them, 4 partitions
  each), within 2 s before and after, a left join: one output per pair and per unjoined
  left record.

The machine is shared, and its speed drifts by a quarter within minutes, so each job is
measured against a per-key sum run next to it: in each round, every job runs in a pair
with the sum, back to back (which of the two goes first alternates), and its share of
the sum is the median over the rounds of its ratio to its own pair's sum. Each run is
measured twice: records per second of wall-clock time, and records per CPU second of
the benchmark's process (all its threads: what other processes on the machine take does
not count). ``--mode rounds`` runs each job once per round instead (the round's order
reversed each time) against the round's one sum run — a job can then run half a minute
away from its sum, and the drift in between shows in its ratio. ``--worker process`` runs
each worker in a process of its own, started once its records are written, as a worker
runs in production (the CPU counted is that process's): this process holds the 1M
records it produced, which the worker's process does not.

Run: ``.venv/bin/python -m bench.windows`` (``--records N --keys K --rounds R --jobs
sum,tumbling,… --mode pairs|rounds --worker inline|process`` for another run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.worker import _run_worker
from framework.config import JobConfig, load_config
from framework.coordinator.builder import build_job_model
from framework.coordinator.supervisor import die_with_parent
from framework.metadata import publish_model
from framework.metadata.jobmodel import JobModel
from framework.systems import open_system
from framework.systems.base import ProducerRecord

RECORDS = 1_000_000
KEYS = 10_000
PARTITIONS = 4
STEP_MS = 3.6
MAX_DELAY_MS = 5_000
ROUNDS = 3

SUM_TASK = '''\
from framework import StreamTask


class Task(StreamTask):
    def init(self, context):
        self.totals = context.store("state")

    def process(self, envelope, collector, coordinator):
        total = (self.totals.get(envelope.key) or 0) + envelope.value["amount"]
        self.totals.put(envelope.key, total)
        collector.send(f"{envelope.ssp.system}.out", key=envelope.key, value=total)
'''

WINDOW_TASK = '''\
from framework import StreamTask
from framework.windows import *

WINDOW = {window}
REDUCER = {reducer}


class Task(StreamTask):
    def init(self, context):
        self.windows = Windows(context, "state", WINDOW, REDUCER)

    def process(self, envelope, collector, coordinator):
        self.process_batch((envelope,), collector, coordinator)

    def process_batch(self, envelopes, collector, coordinator):
        for window in self.windows.process_batch(envelopes, collector):
            collector.send("local.out", key=window.key,
                           value={{"start": window.start, "value": window.value}})
'''

JOIN_TASK = '''\
from framework import StreamTask
from framework.windows import IntervalJoin


class Task(StreamTask):
    def init(self, context):
        self.join = IntervalJoin(context, "state", left="local.events", right="local.other",
                                 before_ms=2_000, after_ms=2_000, grace_ms=10_000,
                                 how="left")

    def process(self, envelope, collector, coordinator):
        self.process_batch((envelope,), collector, coordinator)

    def process_batch(self, envelopes, collector, coordinator):
        for pair in self.join.process_batch(envelopes, collector):
            collector.send("local.out", key=pair.key,
                           value={"left": pair.left_ts, "right": pair.right_ts})
'''

GRACE = "grace_ms=10_000"
JOBS = {
    "sum": ("per-key sum", SUM_TASK),
    "tumbling": ("tumbling 1 min, count", WINDOW_TASK.format(
        window=f"Tumbling(size_ms=60_000, {GRACE})", reducer="count()")),
    "hopping": ("hopping 5 min / 1 min, count", WINDOW_TASK.format(
        window=f"Hopping(size_ms=300_000, advance_ms=60_000, {GRACE})", reducer="count()")),
    "hopping4": ("hopping 5 min / 1 min, 4 results", WINDOW_TASK.format(
        window=f"Hopping(size_ms=300_000, advance_ms=60_000, {GRACE})",
        reducer='aggregate(views=count(), spent=sum_of("amount"), top=max_of("amount"), '
                'avg=mean_of("amount"))')),
    "session": ("session, gap 30 s, count", WINDOW_TASK.format(
        window=f"Session(gap_ms=30_000, {GRACE})", reducer="count()")),
    "join": ("interval join ±2 s, left", JOIN_TASK),
}


def _job(folder: Path, name: str, text: str) -> JobConfig:
    folder.mkdir(parents=True)
    (folder / f"{name}_task.py").write_text(text)
    inputs = '"local.events", "local.other"' if name == "join" else '"local.events"'
    (folder / "job.toml").write_text(f"""\
[job]
name = "bench-{name}"
task = "{name}_task:Task"
inputs = [{inputs}]
fetch_max_records = 5000

[systems.local]
type = "local"
path = "data"

[streams."local.events"]
[streams."local.other"]
[streams."local.out"]
[stores.state]
""")
    return load_config(folder / "job.toml")


def _records(count: int, keys: int) -> list[ProducerRecord]:
    """Records in production order; each at most MAX_DELAY_MS after its event time."""
    rng = random.Random(7)
    names = [f"key-{n:05d}".encode() for n in range(keys)]
    timed = []
    for n in range(count):
        ts = int(n * STEP_MS)
        value = json.dumps({"amount": rng.randint(1, 9)}).encode()
        timed.append((ts + rng.randrange(MAX_DELAY_MS), ts, rng.choice(names), value))
    timed.sort(key=lambda item: item[0])
    return [ProducerRecord("events", key, value, timestamp=ts) for _, ts, key, value in timed]


def _split(records: list[ProducerRecord]) -> list[ProducerRecord]:
    """Every other record to the join's second input, ``other``."""
    return [record if n % 2 == 0 else ProducerRecord("other", record.key, record.value,
                                                      timestamp=record.timestamp)
            for n, record in enumerate(records)]


async def _rate(config: JobConfig, records: list[ProducerRecord],
                apart: bool = False) -> tuple[float, float, int]:
    """(records per second, records per CPU second, outputs) of one worker running
    ``config`` over ``records``: in this process, or (``apart``) in a process of its own
    started once the records are written (`_child`; CPU: that process's)."""
    system = open_system(config.system("local"))
    await system.start()
    try:
        counts = {}
        for stream in config.inputs:
            counts[stream] = PARTITIONS
            await system.create_stream(stream.partition(".")[2], PARTITIONS)
        await system.create_stream("out", PARTITIONS)
        model = build_job_model(config, counts, None)
        await system.create_stream(config.changelog_stream("state").partition(".")[2],
                                   model.changelog_partitions, compacted=True)
        await publish_model(system, config, model)
        for at in range(0, len(records), 10_000):
            await system.produce(records[at:at + 10_000])
        if apart:
            elapsed, cpu = _apart(config, len(records))
        else:
            elapsed, cpu = await _work(config, model, len(records))
        outputs = sum(r.end for r in (await system.offsets("out")).values())
    finally:
        await system.close()
    return len(records) / elapsed, len(records) / cpu, outputs


async def _work(config: JobConfig, model: JobModel, records: int) -> tuple[float, float]:
    """(seconds, CPU seconds of this process) for one worker of ``model`` to process and
    commit ``records`` records (`bench.worker._run_worker`)."""
    cpu = time.process_time()
    _, elapsed = await _run_worker(config, model, records)
    return elapsed, time.process_time() - cpu


def _apart(config: JobConfig, records: int) -> tuple[float, float]:
    """`_work` in a process of its own (`_child`), importing this tree's code: as a
    worker runs in production, without the records this process produced."""
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-m", "bench.windows", "--child",
                           str(config.path), str(records)], cwd=root, capture_output=True,
                          text=True, preexec_fn=die_with_parent)  # SIGTERM if we die
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-10:])
        raise RuntimeError(f"the worker's process for {config.name} failed (exit "
                           f"{done.returncode}):\n{tail}")
    elapsed, cpu = done.stdout.split()[-2:]
    return float(elapsed), float(cpu)


def _child(job: Path, records: int) -> None:
    """The worker of `_apart`, on the model `_rate` published (built again from the same
    partition counts); prints its seconds and CPU seconds."""
    config = load_config(job)
    model = build_job_model(config, dict.fromkeys(config.inputs, PARTITIONS), None)
    elapsed, cpu = asyncio.run(_work(config, model, records))
    print(f"{elapsed:.6f} {cpu:.6f}")


def _order(names: list[str], number: int, mode: str) -> list[list[str]]:
    """Round ``number``'s runs, as groups whose jobs are compared with the group's sum:
    a pair per job (``pairs``; the sum first in every other pair), or the whole round
    (``rounds``; in reverse every other round).

    >>> _order(["sum", "a", "b"], 1, "pairs"), _order(["sum", "a", "b"], 1, "rounds")
    ([['b', 'sum'], ['sum', 'a']], [['b', 'a', 'sum']])
    """
    if mode == "rounds":
        return [names if number % 2 == 0 else names[::-1]]
    others = names[1:] if number % 2 == 0 else names[:0:-1]
    return [["sum", name] if (number + n) % 2 == 0 else [name, "sum"]
            for n, name in enumerate(others)]


def run(records: int = RECORDS, keys: int = KEYS, rounds: int = ROUNDS,
        jobs: list[str] | None = None, mode: str = "pairs",
        worker: str = "inline") -> dict[str, float]:
    """Run the jobs interleaved with the sum (see the module); print and return each
    job's median share of the sum in records per CPU second (the sum's own entry: its
    median of those). ``worker="process"``: each worker in a process of its own."""
    names = ["sum", *[name for name in (jobs or list(JOBS)) if name != "sum"]]
    data = _records(records, keys)
    print(f"{records:,} JSON records, {keys:,} keys, {PARTITIONS} partitions, 1 worker, "
          f"logged RocksDB store; event time spans {records * STEP_MS / 60_000:,.0f} min; "
          f"{rounds} rounds, "
          f"{'each job next to a sum run' if mode == 'pairs' else 'order alternating'}"
          f"{'; each worker in a process of its own' if worker == 'process' else ''}",
          flush=True)
    rates: dict[str, list[float]] = {name: [] for name in names}
    cpus: dict[str, list[float]] = {name: [] for name in names}
    wall: dict[str, list[float]] = {name: [] for name in names}  # ratios to the sum
    per_cpu: dict[str, list[float]] = {name: [] for name in names}
    outputs: dict[str, int] = {}
    work = Path(tempfile.mkdtemp(prefix="sampan-bench-windows-"))
    try:
        for number in range(rounds):
            for group in _order(names, number, mode):
                measured = {}
                for name in group:
                    config = _job(work / f"{name}-{number}-{len(rates[name])}", name,
                                  JOBS[name][1])
                    rate, cpu, outputs[name] = asyncio.run(_rate(
                        config, _split(data) if name == "join" else data,
                        worker == "process"))
                    measured[name] = rate, cpu
                    rates[name].append(rate)
                    cpus[name].append(cpu)
                    print(f"  round {number + 1} {name:<9} {rate:>10,.0f} records/s "
                          f"{cpu:>10,.0f} records/CPU-s", flush=True)
                base_rate, base_cpu = measured["sum"]
                for name, (rate, cpu) in measured.items():
                    wall[name].append(rate / base_rate)
                    per_cpu[name].append(cpu / base_cpu)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'job':<38} {'records/s':>10} {'rec/CPU-s':>10}  share of the sum (wall; CPU)")
    shares = {"sum": statistics.median(cpus["sum"])}
    for name in names:
        shares[name] = statistics.median(per_cpu[name])
        line = (f"{JOBS[name][0]:<38} {statistics.median(rates[name]):>10,.0f} "
                f"{statistics.median(cpus[name]):>10,.0f}")
        if name != "sum":
            line += (f"  {statistics.median(wall[name]):.0%}; {shares[name]:.0%} (per "
                     f"{'pair' if mode == 'pairs' else 'round'} "
                     f"{', '.join(f'{r:.0%}' for r in per_cpu[name])})")
        print(f"{line}  ({outputs[name]:,} outputs)")
    return shares


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=RECORDS)
    parser.add_argument("--keys", type=int, default=KEYS)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--jobs", default=",".join(JOBS),
                        help=f"comma-separated, of {', '.join(JOBS)} (sum always runs)")
    parser.add_argument("--mode", choices=("pairs", "rounds"), default="pairs",
                        help="each job next to its own sum run (pairs), or once per round "
                             "against the round's sum (rounds)")
    parser.add_argument("--worker", choices=("inline", "process"), default="inline",
                        help="run each worker in this process (inline), or in a process "
                             "of its own once its records are written, as in production "
                             "(process: the CPU counted is that process's)")
    parser.add_argument("--child", nargs=2, metavar=("JOB_FILE", "RECORDS"),
                        help=argparse.SUPPRESS)  # the process of --worker process
    args = parser.parse_args()
    if args.child:
        _child(Path(args.child[0]), int(args.child[1]))
        return
    run(args.records, args.keys, args.rounds, args.jobs.split(","), args.mode, args.worker)


if __name__ == "__main__":
    main()
