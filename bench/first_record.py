"""Time from `sampan run` to the first processed record of a fresh job, on real Apache
Kafka or on the local log.

    python -m bench.first_record [--system kafka|local] [--runs 5] [--workers 2]
                                 [--initial-delay-ms 3000] [--other CHECKOUT]

On Kafka (the default) it starts one Apache Kafka broker (`tests/kafka_broker.py`) with
the broker's default ``group.initial.rebalance.delay.ms`` (3000; the test broker sets 0);
on the local log every run has a log of its own in its job folder. Per run: a fresh job
(its own name, so its own topics and coordinator lease) of the per-key sum with one record
already in its input; `sampan run` is started and the figure is the output record's
timestamp (the worker's produce time) minus the launch time. The coordinator's
and the workers' log lines split it into: process start → lease held (interpreter,
imports, connecting, the lease, whose own time the coordinator logs), lease → job model
published, model → workers spawned (told to go), → worker's first log line (its
interpreter, imports and connecting when not done by then), → the worker resumed
(restore, assignment), → the first output; and the CPU time the coordinator and its
workers had used by then (Linux). Runs use
compiled bytecode (the package is byte-compiled first and PYTHONDONTWRITEBYTECODE is not
passed on), as an installed sampan would. ``--other CHECKOUT`` interleaves runs of another
checkout of sampan (e.g. a `git worktree` of an older commit) on the same broker: run n of
this checkout, then run n of the other.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from kafka_broker import running_kafka  # noqa: E402

from bench.sum_task import sum_task_source  # noqa: E402
from framework.config.sections import SystemConfig  # noqa: E402
from framework.coordinator.supervisor import die_with_parent  # noqa: E402
from framework.errors import SampanError  # noqa: E402
from framework.systems import open_system  # noqa: E402
from framework.systems.base import ProducerRecord  # noqa: E402
from framework.systems.reading import read_range  # noqa: E402
from groupers import SystemStreamPartition  # noqa: E402

LEASE_TOOK = re.compile(r"holds the lease of job .*, (\d+) ms\)")
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def _job(folder: Path, system: SystemConfig, name: str, workers: int) -> Path:
    folder.mkdir(parents=True)
    (folder / "sum_task.py").write_text(sum_task_source(f'"{system.name}.sums"'))
    path = folder / "job.toml"
    if system.type == "kafka":
        section = f"""type = "kafka"
bootstrap = "{system.bootstrap}"
client_options = {{ namespace = "{name}." }}"""
    else:
        section = f'type = "local"\npath = "{system.path}"'
    path.write_text(f"""\
[job]
name = "{name}"
task = "sum_task:SumTask"
inputs = ["{system.name}.events"]
workers = {workers}
commit_interval_ms = 100

[systems.{system.name}]
{section}

[streams."{system.name}.events"]
partitions = 2

[streams."{system.name}.sums"]
partitions = 2

[stores.totals]
""")
    return path


async def _prepare(config: SystemConfig) -> None:
    system = open_system(config)
    await system.start()
    try:
        await system.create_stream("events", 2)
        await system.create_stream("sums", 2)
        await system.produce([ProducerRecord("events", b"k", b'{"amount": 1}')])
    finally:
        await system.close()


def _system_config(system: str, bootstrap: str, folder: Path, name: str) -> SystemConfig:
    if system == "kafka":
        return SystemConfig(name="kafka", type="kafka", bootstrap=bootstrap,
                            client_options={"namespace": f"{name}."})
    return SystemConfig(name="local", type="local", path=folder / "data")


async def _first_output_ms(config: SystemConfig, timeout_s: float) -> int:
    """The timestamp of the first record of the output stream (waits for it); the wait's
    own polling does not count, the record's timestamp is the worker's."""
    system = open_system(config)
    await system.start()
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                ends = await system.offsets("sums")
            except SampanError:  # not created yet
                ends = {}
            for partition, span in ends.items():
                if span.end > span.oldest:
                    ssp = SystemStreamPartition(config.name, "sums", partition)
                    async for batch in read_range(system, ssp, span.oldest, span.end):
                        return min(int(record.timestamp) for record in batch)
            await asyncio.sleep(0.05)
        raise RuntimeError(f"no output within {timeout_s:g} s")
    finally:
        await system.close()


def _stamps(path: Path) -> list[tuple[float, str]]:
    found = []
    for line in path.read_text(errors="replace").splitlines():
        match = STAMP.match(line)
        if match:
            at = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            found.append((at, line))
    return found


def _first(stamps: list[tuple[float, str]], needle: str) -> float | None:
    return next((at for at, line in stamps if needle in line), None)


def run_once(system: str, bootstrap: str, folder: Path, number: int, workers: int,
             env: dict[str, str]) -> dict[str, float]:
    name = f"first-{os.getpid()}-{number}"
    config = _system_config(system, bootstrap, folder / name, name)
    path = _job(folder / name, config, name, workers)
    asyncio.run(_prepare(config))
    log = folder / name / "run.log"
    with log.open("wb") as out:
        launched = time.time()
        process = subprocess.Popen(
            [sys.executable, "-m", "framework.cli", "run", str(path), "--worker-logs",
             str(folder / name / "logs")], stdout=out, stderr=subprocess.STDOUT, env=env,
            cwd=folder / name, preexec_fn=die_with_parent)  # SIGTERM if the bench dies
        try:
            first = asyncio.run(_first_output_ms(config, 120)) / 1000
            cpu = _cpu_seconds(process.pid)
        finally:
            process.terminate()
            process.wait(60)
    coordinator = _stamps(log)
    workers_log = [s for p in sorted((folder / name / "logs").glob("worker-*.log"))
                   for s in _stamps(p)]
    published = _first(coordinator, "published job model")
    spawned = _first(coordinator, "started worker")
    worker_first = min((at for at, _ in workers_log), default=None)
    resumed = max((at for at, line in workers_log if "restore store" in line), default=None)
    first_line = coordinator[0][0] if coordinator else None
    held = _first(coordinator, "holds the lease")  # absent from older checkouts
    figures = {"total": first - launched}
    took = next((LEASE_TOOK.search(line) for _, line in coordinator
                 if "holds the lease" in line), None)
    if took:
        figures["the lease itself"] = float(took.group(1)) / 1000
    marks = [("start → first log line", launched, None if held else first_line),
             ("start → lease held (imports, connecting)", launched, held),
             ("→ model published (reads, writes)", held, published),
             ("→ model published (lease, reads)", None if held else first_line, published),
             ("→ workers spawned", published, spawned),
             ("→ worker's first log line", spawned, worker_first),
             ("→ stores open", worker_first, resumed),
             ("→ first output", resumed, first)]
    for label, since, until in marks:
        if since is not None and until is not None:
            figures[label] = until - since
    figures.update(cpu)
    return figures


def _cpu_seconds(coordinator: int) -> dict[str, float]:
    """CPU time (user + system) so far of `sampan run` and of all its worker processes
    together (Linux /proc; nothing elsewhere): on a machine with fewer cores than
    processes, their sum bounds the start from below."""
    tick = os.sysconf("SC_CLK_TCK")

    def stat(pid: str) -> list[str]:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()

    try:
        own = stat(str(coordinator))
    except OSError:
        return {}
    workers = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError, IndexError):
            fields = stat(pid)
            if int(fields[1]) == coordinator:
                workers += (int(fields[11]) + int(fields[12])) / tick
    return {"CPU: coordinator": (int(own[11]) + int(own[12])) / tick,
            "CPU: workers together": workers}


def _summary(label: str, runs: list[dict[str, float]]) -> None:
    print(f"{label}: median of {len(runs)} runs:")
    for key in runs[0]:
        values = [r[key] for r in runs if key in r]
        print(f"  {key:36} {statistics.median(values):6.2f} s  "
              f"(min {min(values):.2f}, max {max(values):.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", choices=("kafka", "local"), default="kafka",
                        help="where the job's streams live (default %(default)s)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--initial-delay-ms", type=int, default=3000,
                        help="the broker's group.initial.rebalance.delay.ms (Kafka's default "
                        "3000)")
    parser.add_argument("--other", type=Path, metavar="CHECKOUT",
                        help="another sampan checkout whose runs interleave with this one's")
    args = parser.parse_args()
    roots = {"this checkout": ROOT, **({f"{args.other}": args.other} if args.other else {})}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    envs = {}
    for label, root in roots.items():
        compileall.compile_dir(str(root / "framework"), quiet=1)
        compileall.compile_dir(str(root / "groupers"), quiet=1)
        envs[label] = {**env, "PYTHONPATH": str(root)}
    if args.system == "kafka":
        print(f"sampan run → first processed record, fresh job, {args.workers} workers, "
              f"Apache Kafka with group.initial.rebalance.delay.ms = {args.initial_delay_ms}; "
              f"load average {_load()}")
    else:
        print(f"sampan run → first processed record, fresh job, {args.workers} workers, "
              f"local log; load average {_load()}")
    runs: dict[str, list[dict[str, float]]] = {label: [] for label in roots}
    with contextlib.ExitStack() as stack:
        bootstrap = ""
        if args.system == "kafka":
            settings = {"group.initial.rebalance.delay.ms": str(args.initial_delay_ms)}
            bootstrap = stack.enter_context(running_kafka(settings=settings)).bootstrap
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="sampan-bench-first-"))
        for number in range(args.runs):
            for index, label in enumerate(roots):
                figures = run_once(args.system, bootstrap, Path(tmp), number * 2 + index,
                                   args.workers, envs[label])
                runs[label].append(figures)
                print(f"{label}, run {number + 1}: " + ", ".join(
                    f"{k} {v:.2f} s" for k, v in figures.items()), flush=True)
    for label, done in runs.items():
        _summary(label, done)
    print(f"load average at the end {_load()}")


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())

if __name__ == "__main__":
    main()
