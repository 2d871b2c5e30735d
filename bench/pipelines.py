"""Pipeline benchmark: a pipeline's per-key sum and tumbling-window count against the
hand-written task doing the same, on the same input, in interleaved pairs.

Each job runs one in-process `Worker` on the local log over the same records as
bench/windows.py (4 input partitions, 4 tasks, one logged RocksDB store, JSON values, an
event time advancing 3.6 ms per record with up to 5 s of delay), timed from the worker's
start until every record is processed and committed:

- sum: ``totals[key] += amount``, one output per record — the task of bench/windows.py,
  and ``source("events").aggregate(...).to("out")``;
- tumbling: `Windows` with `Tumbling(60 s)` and `count()`, one output per closed window —
  the task of bench/windows.py, and ``source("events").window(...).map_values(...)
  .to("out")``.

The machine is shared and its speed drifts, so each pipeline runs in a pair with its task,
back to back (which goes first alternates by round), and its share is the median over the
rounds of its ratio to its own pair's task, in records per CPU second of this process
(what other processes take does not count) and in records per wall-clock second.

Run: ``.venv/bin/python -m bench.pipelines`` (``--records N --keys K --rounds R``).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.windows import GRACE, JOBS, _rate, _records
from framework.config import JobConfig, load_config

RECORDS = 300_000
KEYS = 10_000
ROUNDS = 3

SUM_PIPELINE = '''\
from framework.pipelines import Pipeline


def build():
    p = Pipeline()
    (p.source("events")
      .aggregate(lambda: 0, lambda total, event: total + event["amount"], store="state")
      .to("out"))
    return p
'''

TUMBLING_PIPELINE = f'''\
from framework.pipelines import Pipeline
from framework.windows import Tumbling, count


def build():
    p = Pipeline()
    (p.source("events")
      .window(Tumbling(size_ms=60_000, {GRACE}), count(), store="state")
      .map_values(lambda window: {{"start": window.start, "value": window.value}})
      .to("out"))
    return p
'''

PAIRS = {
    "sum": ("per-key sum", JOBS["sum"][1], SUM_PIPELINE),
    "tumbling": ("tumbling 1 min, count", JOBS["tumbling"][1], TUMBLING_PIPELINE),
}


def _job(folder: Path, name: str, form: str, text: str) -> JobConfig:
    """A job running ``text`` — a task module, or a pipeline module (``form``)."""
    folder.mkdir(parents=True)
    (folder / f"{name}_{form}.py").write_text(text)
    runs = (f'task = "{name}_task:Task"\ninputs = ["local.events"]' if form == "task"
            else f'pipeline = "{name}_pipeline:build"')
    (folder / "job.toml").write_text(f"""\
[job]
name = "bench-{name}-{form}"
{runs}
fetch_max_records = 5000

[systems.local]
type = "local"
path = "data"

[streams."local.events"]
[streams."local.out"]
[stores.state]
""")
    return load_config(folder / "job.toml")


def run(records: int = RECORDS, keys: int = KEYS, rounds: int = ROUNDS) -> dict[str, float]:
    """Each pipeline against its task (see the module); print and return each pipeline's
    median share of its task in records per CPU second."""
    data = _records(records, keys)
    print(f"{records:,} JSON records, {keys:,} keys, 4 partitions, 1 worker, logged RocksDB "
          f"store; {rounds} rounds, each pipeline next to its task", flush=True)
    shares: dict[str, float] = {}
    work = Path(tempfile.mkdtemp(prefix="sampan-bench-pipelines-"))
    try:
        results = {}
        for name, (label, task, pipeline) in PAIRS.items():
            cpu: dict[str, list[float]] = {"task": [], "pipeline": []}
            wall: dict[str, list[float]] = {"task": [], "pipeline": []}
            outputs: dict[str, int] = {}
            for number in range(rounds):
                order = ["task", "pipeline"] if number % 2 == 0 else ["pipeline", "task"]
                for form in order:
                    config = _job(work / f"{name}-{form}-{number}", name, form,
                                  task if form == "task" else pipeline)
                    rate, per_cpu, outputs[form] = asyncio.run(_rate(config, data))
                    wall[form].append(rate)
                    cpu[form].append(per_cpu)
                    print(f"  round {number + 1} {name:<9} {form:<9} {rate:>10,.0f} "
                          f"records/s {per_cpu:>10,.0f} records/CPU-s", flush=True)
            if outputs["task"] != outputs["pipeline"]:
                raise RuntimeError(f"{name}: the task sent {outputs['task']:,} records, the "
                                   f"pipeline {outputs['pipeline']:,}")
            results[name] = label, cpu, wall, outputs["task"]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'job':<24} {'form':<9} {'records/s':>10} {'rec/CPU-s':>10}  pipeline/task "
          "(CPU; wall; per round CPU)")
    for name, (label, cpu, wall, outputs) in results.items():
        ratios = [p / t for p, t in zip(cpu["pipeline"], cpu["task"], strict=True)]
        walls = [p / t for p, t in zip(wall["pipeline"], wall["task"], strict=True)]
        shares[name] = statistics.median(ratios)
        for form in ("task", "pipeline"):
            line = (f"{label:<24} {form:<9} {statistics.median(wall[form]):>10,.0f} "
                    f"{statistics.median(cpu[form]):>10,.0f}")
            if form == "pipeline":
                line += (f"  {shares[name]:.0%}; {statistics.median(walls):.0%}; "
                         f"{', '.join(f'{r:.0%}' for r in ratios)}")
            print(f"{line}  ({outputs:,} outputs)")
    return shares


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=RECORDS)
    parser.add_argument("--keys", type=int, default=KEYS)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    run(args.records, args.keys, args.rounds)


if __name__ == "__main__":
    main()
