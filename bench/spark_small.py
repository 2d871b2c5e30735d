"""Small Spark commands end to end: a ``sampan`` DataSource read of 20,010 records and
`sampan rekey` of a 504-key store, each in a fresh Python process with one Spark session.

1. Read: ``spark.read.format("sampan")…load().count()`` of 20,010 word-count inputs
   (8 partitions), as ``python -c`` would run it.
2. Re-key: `rekey_job` of a stopped 8-task word count whose ``counts`` store has 504 keys,
   8 → 4 tasks (what ``sampan rekey JOB --tasks 4`` runs), on a fresh copy of its data.

Per command: the wall time from spawning the process to its exit (interpreter, JVM, Spark
session, the work, the JVM's exit), the median of ``--runs`` after one warm-up run (the
first run on a machine also writes the JVM's class archive: `framework.spark.jvm`), and
its split: Python start-up, session start, the command, exit; and the CPU time of every
process the command started (the JVM and Spark's Python processes included), which a
shared machine's load does not inflate as it does wall time. For the re-key the command
splits further, from Spark's event log: metadata (before and after Spark), planning (the
DataSource's planner processes), the read stage (scan + partial compaction) and the write
stage (compaction, routing, producing). The load average is printed with each figure.

Run: ``.venv/bin/python -m bench.spark_small [--records N] [--keys N] [--runs N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.spark import _copy, _fill_reads, _fill_state
from framework.config import load_config

_PR_SET_CHILD_SUBREAPER = 36
CHILD = """
import json, sys, time
from pathlib import Path
marks = {"imported": 0.0}
marks["imported"] = time.time()
from framework.spark import local_session
spark = local_session(options={"spark.eventLog.enabled": "true",
                               "spark.eventLog.compress": "false",
                               "spark.eventLog.dir": sys.argv[3]})
marks["session"] = time.time()
if sys.argv[1] == "read":
    rows = (spark.read.format("sampan").option("job", sys.argv[2])
            .option("stream", "local.words").load().count())
    marks["rows"] = rows
else:
    from framework.spark.rekey import rekey_job
    marks["keys"] = sum(rekey_job(sys.argv[2], 4, spark=spark).keys.values())
marks["done"] = time.time()
spark.stop()
print("MARKS " + json.dumps(marks), flush=True)
"""


def _stages(log_dir: Path) -> dict[str, float]:
    """From the session's event log: when the first SQL query started, its stages' spans."""
    [log] = [p for p in log_dir.rglob("*") if p.is_file() and p.name.startswith(("events",
                                                                                 "local-"))]
    sql_start, stages = None, []
    for line in log.read_text().splitlines():
        event = json.loads(line)
        kind = event["Event"]
        if kind.endswith("SparkListenerSQLExecutionStart") and sql_start is None:
            sql_start = event["time"] / 1000
        elif kind == "SparkListenerStageCompleted":
            info = event["Stage Info"]
            if "Submission Time" in info:
                stages.append((info["Submission Time"] / 1000, info["Completion Time"] / 1000))
    stages.sort()
    assert sql_start is not None and stages, f"no query in {log}"
    return {"sql_start": sql_start, "first_stage": stages[0][0],
            "read_end": stages[0][1], "write_start": stages[-1][0], "last_end": stages[-1][1]}


def _adopt_orphans() -> None:
    """Become the parent of our descendants when theirs exit (Linux), so that the JVM and
    Spark's Python processes are reaped here and their CPU counted."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _reap_all() -> None:
    while True:
        try:
            os.wait()
        except ChildProcessError:
            return


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(command: str, job: Path, folder: Path) -> dict[str, Any]:
    """One fresh process running ``command``; wall-clock marks of each step, and the CPU
    time of every process it started."""
    log_dir = folder / f"events-{time.monotonic_ns()}"
    log_dir.mkdir()
    load = os.getloadavg()[0]
    cpu = _cpu_of_children()
    spawned = time.time()
    done = subprocess.run([sys.executable, "-c", CHILD, command, str(job), str(log_dir)],
                          capture_output=True, text=True, check=False)
    ended = time.time()
    _reap_all()
    cpu = _cpu_of_children() - cpu
    marks_line = [line for line in done.stdout.splitlines() if line.startswith("MARKS ")]
    if done.returncode != 0 or not marks_line:
        raise SystemExit(f"{command} failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    marks = json.loads(marks_line[0][6:])
    return {"spawned": spawned, "ended": ended, "load": (load, os.getloadavg()[0]), "cpu": cpu,
            **marks, **_stages(log_dir)}


def _split_read(run: dict[str, Any]) -> dict[str, float]:
    return {"end to end": run["ended"] - run["spawned"], "cpu, all processes": run["cpu"],
            "python start-up": run["imported"] - run["spawned"],
            "session start": run["session"] - run["imported"],
            "read + count()": run["done"] - run["session"],
            "  of which load()": run["sql_start"] - run["session"],
            "  of which planning": run["first_stage"] - run["sql_start"],
            "  of which tasks": run["last_end"] - run["first_stage"],
            "exit": run["ended"] - run["done"]}


def _split_rekey(run: dict[str, Any]) -> dict[str, float]:
    return {"end to end": run["ended"] - run["spawned"], "cpu, all processes": run["cpu"],
            "python start-up": run["imported"] - run["spawned"],
            "session start": run["session"] - run["imported"],
            "rekey": run["done"] - run["session"],
            "  metadata before Spark": run["sql_start"] - run["session"],
            "  planning": run["first_stage"] - run["sql_start"],
            "  read stage": run["read_end"] - run["first_stage"],
            "  write stage": run["last_end"] - run["write_start"],
            "  commit": run["done"] - run["last_end"],
            "exit": run["ended"] - run["done"]}


def _report(label: str, splits: list[dict[str, float]], loads: list[tuple[float, float]],
            warm_up: float) -> None:
    ends = [s["end to end"] for s in splits]
    low = min(min(pair) for pair in loads)
    high = max(max(pair) for pair in loads)
    print(f"{label}: end to end {statistics.median(ends):.1f} s, median of {len(ends)} "
          f"({', '.join(f'{e:.1f}' for e in ends)}; warm-up {warm_up:.1f} s), load average "
          f"{low:.1f}–{high:.1f}", flush=True)
    for step in splits[0]:
        if step != "end to end":
            print(f"  {step:<24} {statistics.median(s[step] for s in splits):6.1f} s",
                  flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_010)
    parser.add_argument("--keys", type=int, default=504)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    _adopt_orphans()
    folder = Path(tempfile.mkdtemp(prefix="sampan-bench-spark-small-"))
    try:
        reads, state = _copy(folder, "reads"), _copy(folder, "state")
        asyncio.run(_fill_reads(load_config(reads), args.records))
        asyncio.run(_fill_state(load_config(state), args.keys))
        pristine = folder / "state-pristine"
        shutil.copytree(state.parent, pristine)

        def rekey_once() -> dict[str, Any]:
            shutil.rmtree(state.parent)
            shutil.copytree(pristine, state.parent)
            run = _run("rekey", state, folder)
            assert run["keys"] == args.keys, run
            return run

        runs = [_run("read", reads, folder) for _ in range(args.runs + 1)]
        assert all(run["rows"] == args.records for run in runs), runs
        _report(f"small read ({args.records:,} rows, 8 partitions) + count()",
                [_split_read(r) for r in runs[1:]], [r["load"] for r in runs[1:]],
                _split_read(runs[0])["end to end"])
        runs = [rekey_once() for _ in range(args.runs + 1)]
        _report(f"small rekey ({args.keys:,} keys, 8 → 4 tasks)",
                [_split_rekey(r) for r in runs[1:]], [r["load"] for r in runs[1:]],
                _split_rekey(runs[0])["end to end"])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
