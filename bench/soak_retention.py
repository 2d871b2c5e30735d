"""Soak of a per-key running-sum job on the local log with retention: log size, each
worker's memory and the lag, every minute; then whether the job stayed exact.

`sampan run` runs the job (``--workers`` workers, ``--partitions`` input partitions, so as
many tasks, ``--stores`` RocksDB stores per task, all under ``job.store_memory_mb``); this
process produces records of ``--keys`` keys into ``local.events`` in batches of
``--batch``, as fast as the job takes them (a new batch whenever the lag is under two
batches). Retention (``--retention-bytes`` per partition, ``--retention-ms``) is set on
the local system, so the input and output streams are trimmed by the coordinator;
changelogs are compacted. Every ``--report-s`` seconds it prints the log file's size
(database + WAL), each worker's RSS split into anonymous and file-backed memory
(``/proc/PID/status``), the lag and the records so far. At the end it waits for the lag
to reach 0, stops the job, and checks every store's final sum per key against what was
produced.

Run: ``.venv/bin/python -m bench.soak_retention --minutes 15`` and the many-tasks variant
``--minutes 15 --workers 1 --partitions 64 --stores 2``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from framework.config import JobConfig, load_config
from framework.coordinator.supervisor import die_with_parent
from framework.drill.verify import read_stream
from framework.systems.base import ProducerRecord
from framework.systems.local.system import LocalSystem

REPO = Path(__file__).resolve().parent.parent

TASK = '''\
from framework import StreamTask

STORES = {stores!r}


class SumTask(StreamTask):
    def init(self, context):
        self.stores = [context.store(name) for name in STORES]

    def process(self, envelope, collector, coordinator):
        total = 0
        for store in self.stores:
            total = (store.get(envelope.key) or 0) + envelope.value["amount"]
            store.put(envelope.key, total)
        collector.send("local.sums", key=envelope.key, value=total)
'''


def write_job(folder: Path, args: argparse.Namespace) -> JobConfig:
    stores = [f"sum{n}" for n in range(args.stores)]
    (folder / "soak_task.py").write_text(TASK.format(stores=stores))
    store_tables = "".join(f"[stores.{name}]\n" for name in stores)
    (folder / "job.toml").write_text(f"""\
[job]
name = "soak"
task = "soak_task:SumTask"
inputs = ["local.events"]
workers = {args.workers}
store_memory_mb = {args.store_memory_mb}

[coordinator]
retention_interval_ms = {args.retention_interval_ms}
compaction_interval_ms = 60000

[systems.local]
type = "local"
path = "data"
retention_ms = {args.retention_ms}
retention_bytes = {args.retention_bytes}

[streams."local.events"]
partitions = {args.partitions}

[streams."local.sums"]
partitions = {args.partitions}

{store_tables}""")
    return load_config(folder / "job.toml")


def children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (the coordinator's workers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return sorted(found)


def rss(pid: int) -> tuple[int, int]:
    """(anonymous, file-backed) resident KiB of ``pid``."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("RssAnon", "RssFile"):
            fields[name] = int(value.split()[0])
    return fields.get("RssAnon", 0), fields.get("RssFile", 0)


def log_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in (folder / "data").glob("log.sqlite3*"))


async def lag(system: LocalSystem, config: JobConfig) -> int:
    ends = {p: r.end for p, r in (await system.offsets("events")).items()}
    done = {ssp.partition: offset
            for cp in (await system.read_checkpoints(config.name)).values()
            for ssp, offset in cp.inputs.items()}
    return sum(end - done.get(p, 0) for p, end in ends.items())


async def soak(folder: Path, args: argparse.Namespace) -> int:
    config = write_job(folder, args)
    process = subprocess.Popen(
        [sys.executable, "-m", "framework.cli", "run", str(config.path)], cwd=REPO,
        stdout=open(folder / "coordinator.log", "wb"),  # noqa: SIM115
        stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        preexec_fn=die_with_parent)  # SIGTERM if the bench dies
    system = LocalSystem("local", folder / "data")
    truth: Counter[str] = Counter()
    rng = random.Random(7)
    names = [f"key-{n:05d}" for n in range(args.keys)]
    produced = 0
    started = time.monotonic()
    next_report = started + args.report_s
    peak: dict[int, int] = {}
    bound = args.retention_bytes * args.partitions * 2 / (1 << 20)
    print(f"soak: {args.workers} workers, {args.partitions} tasks, {args.stores} store(s) per "
          f"task, store_memory_mb = {args.store_memory_mb}; retention "
          f"{args.retention_bytes} B per partition, {args.retention_ms} ms; payload bound of "
          f"input + output streams {bound:.1f} MiB (+ changelogs: one record per key)",
          flush=True)
    try:
        while not (folder / "data" / "log.sqlite3").exists() or "events" not in (
                await system.list_streams()):
            await asyncio.sleep(0.2)
        deadline = started + args.minutes * 60
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"sampan run exited {process.returncode}; see "
                                   f"{folder / 'coordinator.log'}")
            if await lag(system, config) < 2 * args.batch:
                batch = [rng.choice(names) for _ in range(args.batch)]
                truth.update(batch)
                await system.produce([ProducerRecord("events", key.encode(), b'{"amount":1}')
                                      for key in batch])
                produced += len(batch)
            else:
                await asyncio.sleep(0.05)
            if time.monotonic() >= next_report:
                next_report += args.report_s
                workers = children(process.pid)
                memory = []
                for pid in workers:
                    try:
                        anon, file = rss(pid)
                    except OSError:
                        continue
                    peak[pid] = max(peak.get(pid, 0), anon + file)
                    memory.append(f"{pid}: anon {anon / 1024:.0f} MiB file "
                                  f"{file / 1024:.0f} MiB")
                elapsed = time.monotonic() - started
                print(f"{elapsed / 60:5.1f} min  {produced:>11,} records "
                      f"({produced / elapsed:,.0f}/s)  log {log_bytes(folder) / (1 << 20):7.1f} "
                      f"MiB  lag {await lag(system, config):>7,}  workers [{'; '.join(memory)}]",
                      flush=True)
        while await lag(system, config):
            if process.poll() is not None:
                raise RuntimeError(f"sampan run exited {process.returncode}")
            await asyncio.sleep(0.2)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        try:
            process.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    wrong = 0
    for store in (f"sum{n}" for n in range(args.stores)):
        stream = config.changelog_ref(store).stream
        latest: dict[str, int] = {}
        for rows in (await read_stream(system, stream)).values():
            latest.update((key.decode(), json.loads(value)) for key, value in rows)
        wrong += sum(1 for key, count in truth.items() if latest.get(key) != count)
    oldest = {p: r.oldest for p, r in (await system.offsets("events")).items()}
    await system.close()
    print(f"end: {produced:,} records, log {log_bytes(folder) / (1 << 20):.1f} MiB, input "
          f"oldest offsets {sorted(oldest.values())[:4]}…, peak worker RSS "
          f"{max(peak.values(), default=0) / 1024:.0f} MiB, stores exact: "
          f"{'yes' if not wrong else f'NO ({wrong} keys wrong)'}", flush=True)
    return 0 if not wrong else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=15)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=4, help="input partitions = tasks")
    parser.add_argument("--stores", type=int, default=1, help="RocksDB stores per task")
    parser.add_argument("--keys", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=20_000, help="records per produce")
    parser.add_argument("--store-memory-mb", type=int, default=256)
    parser.add_argument("--retention-bytes", type=int, default=16 << 20,
                        help="per partition, on input and output")
    parser.add_argument("--retention-ms", type=int, default=600_000)
    parser.add_argument("--retention-interval-ms", type=int, default=10_000)
    parser.add_argument("--report-s", type=float, default=60)
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it")
    args = parser.parse_args()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        return asyncio.run(soak(args.keep, args))
    with tempfile.TemporaryDirectory(prefix="sampan-soak-") as tmp:
        return asyncio.run(soak(Path(tmp), args))


if __name__ == "__main__":
    sys.exit(main())
