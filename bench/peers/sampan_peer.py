"""The sampan side of bench/peers: the per-key sum job as a sampan job on Kafka.

`write_job` writes the job folder (``job.toml`` and ``sum_task.py``: a logged RocksDB
store, one output per record). Run as a module it is the one-process peer of the
throughput runs: the coordinator's start (streams, changelog, lease, job model, without
starting worker processes) and one `Worker` in the same process and event loop, stopped
after ``--count`` records (0: on SIGTERM), then its final commit and close. It prints the
``PEER-REPORT`` line of `bench.peers.process`. The expansion runs use the same folder
with ``sampan run`` instead (a coordinator and a worker process).

    python -m bench.peers.sampan_peer --folder DIR --bootstrap HOST:PORT --input T \
        --output T --name JOB --count N [--guarantee exactly-once] [--commit-ms 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.peers.process import report_line
from bench.sum_task import sum_task_source
from framework.config import JobConfig, load_config
from framework.coordinator.process import Coordinator
from framework.worker.runner import Worker

__all__ = ["write_job"]


POLL_S = 0.005


def write_job(folder: Path, *, bootstrap: str, name: str, input_topic: str, output_topic: str,
              guarantee: str, commit_ms: int) -> Path:
    """The job folder of one run; returns its ``job.toml``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sum_task.py").write_text(sum_task_source(f'"kafka.{output_topic}"'))
    job = folder / "job.toml"
    job.write_text(f"""\
[job]
name = "{name}"
task = "sum_task:SumTask"
inputs = ["kafka.{input_topic}"]
workers = 1
fetch_max_records = 5000
commit_interval_ms = {commit_ms}
guarantee = "{guarantee}"

[systems.kafka]
type = "kafka"
bootstrap = "{bootstrap}"

[streams."kafka.{input_topic}"]
[streams."kafka.{output_topic}"]
[stores.totals]
""")
    return job


async def _coordinated(config: JobConfig) -> tuple[Coordinator, asyncio.Task[None]]:
    """A coordinator running in this process, once it has published its first model."""
    coordinator = Coordinator(config, start_workers=False)
    running = asyncio.create_task(coordinator.run())
    while coordinator.model is None:
        if running.done():
            await running
            raise RuntimeError("the coordinator stopped before publishing a job model")
        await asyncio.sleep(POLL_S)
    return coordinator, running


async def run(config: JobConfig, count: int) -> dict[str, Any]:
    """Run the job until ``count`` records are processed (0: until SIGTERM); the report."""
    report: dict[str, Any] = {"records": 0, "first_s": 0.0, "cpu_first_s": 0.0,
                              "error": None}
    coordinator: Coordinator | None = None
    coordinating: asyncio.Task[None] | None = None
    worker: Worker | None = None
    try:
        coordinator, coordinating = await _coordinated(config)
        worker = Worker(config, 0)
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, worker.stop.set)
        running = asyncio.create_task(worker.run())
        while not running.done():
            done = sum(i.processed for i in worker.instances)
            if done and not report["first_s"]:
                report["first_s"], report["cpu_first_s"] = time.time(), time.process_time()
            if count and done >= count // 2 and "mid_s" not in report:
                report["mid_s"], report["cpu_mid_s"] = time.time(), time.process_time()
            if count and done >= count:
                worker.stop.set()
                break
            await asyncio.sleep(POLL_S)
        await running  # the final commit and close
        report["records"] = sum(i.processed for i in worker.instances)
    except Exception as error:
        report["error"] = f"{type(error).__name__}: {error}"
        if worker is not None:
            report["records"] = sum(i.processed for i in worker.instances)
    report["done_s"], report["cpu_done_s"] = time.time(), time.process_time()
    if coordinator is not None and coordinating is not None:
        coordinator.stop.set()
        try:
            await coordinating
        except Exception as error:
            report["error"] = report["error"] or f"coordinator: {type(error).__name__}: {error}"
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--guarantee", default="at-least-once")
    parser.add_argument("--commit-ms", type=int, default=1000)
    args = parser.parse_args()
    job = write_job(args.folder, bootstrap=args.bootstrap, name=args.name,
                    input_topic=args.input, output_topic=args.output,
                    guarantee=args.guarantee, commit_ms=args.commit_ms)
    report = asyncio.run(run(load_config(job), args.count))
    print(report_line(report), flush=True)
    sys.exit(1 if report["error"] else 0)


if __name__ == "__main__":
    main()
