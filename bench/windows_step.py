"""Windowing benchmark without the worker: `Windows.process_batch` alone, in a loop.

`bench.windows` measures whole jobs, and on a shared machine a job's share of its sum
swings by ±10 points between runs: a change of a few percent in the windowing code's own
cost does not show there. This loop measures that cost alone, with little noise: one
task's share of `bench.windows`' input (the records of the keys that would hash to one
of its 4 partitions: 2,500 keys, about 100 records each, the same event times), prebuilt
as envelopes, passed to one `Windows` over an in-memory task store in batches of 5,000
(`BATCH`: ``fetch_max_records`` of `bench.windows`' job) as columns, as a worker hands
them (``--per-record``: one `process` call per record instead), every closed window
made into the bench's output value and
handed to a collector that drops it; the store is drained (the states written back)
every 50,000 records, as a commit would. Also ``sum``: the per-key sum's get, put and
send on the same store, per record. Timed in CPU time of the loop only; the collector
off during it (as the worker's loop keeps it quiet).

Run: ``.venv/bin/python -m bench.windows_step`` (``--jobs session,hopping4 --records N
--repeat R --per-record``); prints each job's median and least ns per record over R runs.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import windows as whole
from framework.api import BatchColumns, ColumnarBatch, Envelope
from framework.config.serdes import get_serde
from framework.stores import MemoryEngine, TaskStore
from framework.windows import (
    Hopping,
    Session,
    Tumbling,
    Windows,
    aggregate,
    count,
    max_of,
    mean_of,
    sum_of,
)
from groupers import SystemStreamPartition

GRACE = 10_000
JOBS: dict[str, Any] = {
    "sum": None,
    "tumbling": lambda: (Tumbling(size_ms=60_000, grace_ms=GRACE), count()),
    "hopping": lambda: (Hopping(size_ms=300_000, advance_ms=60_000, grace_ms=GRACE), count()),
    "hopping4": lambda: (Hopping(size_ms=300_000, advance_ms=60_000, grace_ms=GRACE),
                         aggregate(views=count(), spent=sum_of("amount"),
                                   top=max_of("amount"), avg=mean_of("amount"))),
    "session": lambda: (Session(gap_ms=30_000, grace_ms=GRACE), count()),
}
SSP = SystemStreamPartition("local", "events", 0)
DRAIN_EVERY = 50_000
BATCH = 5_000


@dataclass
class _Context:
    """What `Windows` needs of a `TaskContext`: one input partition, in-memory stores."""

    ssps: frozenset[SystemStreamPartition] = frozenset({SSP})
    task_name: str = "Partition 0"
    stores: dict[str, TaskStore] = field(default_factory=dict)

    @property
    def config(self) -> Any:
        return type("Config", (), {"inputs": ("local.events",)})()

    def store(self, name: str) -> TaskStore:
        if name not in self.stores:
            self.stores[name] = TaskStore(name, MemoryEngine(), get_serde("string"),
                                          get_serde("json"))
        return self.stores[name]

    def track_watermark(self, source: Any) -> None:
        pass


class _Columns(ColumnarBatch):
    """A batch already decoded into columns, as a worker's (`ColumnarBatch`)."""

    def __init__(self, columns: BatchColumns) -> None:
        self._columns = columns

    def columns(self) -> BatchColumns:
        return self._columns


def _batches(data: list[Envelope], size: int) -> list[_Columns]:
    """``data`` in batches of ``size`` records as columns."""
    return [_Columns(BatchColumns(SSP, [e.offset for e in part], [e.key for e in part],
                                  [e.value for e in part], [e.timestamp for e in part]))
            for part in (data[at:at + size] for at in range(0, len(data), size))]


class _Dropped:
    """A collector that counts what it is sent."""

    def __init__(self) -> None:
        self.sent = 0

    def send(self, stream: str, key: Any = None, value: Any = None, **_: Any) -> None:
        self.sent += 1


def envelopes(records: int) -> list[Envelope]:
    """One task's share of `bench.windows`' input: the first ``records`` of the keys whose
    number is a multiple of 4."""
    made: list[Envelope] = []
    for record in whole._records(records * 4, whole.KEYS):
        key, value, timestamp = record.key, record.value, record.timestamp
        assert key is not None and value is not None and timestamp is not None
        if int(key[4:]) % 4 == 0:
            made.append(Envelope(SSP, len(made), key.decode(), orjson.loads(value),
                                 timestamp))
            if len(made) == records:
                break
    return made


def _run(job: str, data: list[Envelope], batch: int | None = BATCH) -> tuple[float, int]:
    """(ns per record, outputs) of one pass of ``job`` over ``data``, ``batch`` records
    per `Windows.process_batch` call (None: `Windows.process` per record)."""
    context = _Context()
    store = context.store("state")
    collector = _Dropped()
    process: Any
    if job == "sum":
        batch = None

        def process(envelope: Envelope, collector: Any) -> tuple[()]:
            total = (store.get(envelope.key) or 0) + envelope.value["amount"]
            store.put(envelope.key, total)
            collector.send(f"{envelope.ssp.system}.out", key=envelope.key, value=total)
            return ()
    else:
        kind, reducer = JOBS[job]()
        windows = Windows(context, "state", kind, reducer)  # type: ignore[arg-type]
        process = windows.process
    batches = _batches(data, batch) if batch is not None else []
    gc.collect()
    gc.disable()
    started = time.process_time()
    window: Any
    if batch is None:
        for n, envelope in enumerate(data):
            for window in process(envelope, collector):
                collector.send(f"{envelope.ssp.system}.out", key=window.key,
                               value={"start": window.start, "value": window.value})
            if n % DRAIN_EVERY == DRAIN_EVERY - 1:
                store.drain()
    else:
        for n, columns in enumerate(batches):
            for window in windows.process_batch(columns, collector):
                collector.send("local.out", key=window.key,
                               value={"start": window.start, "value": window.value})
            if ((n + 1) * batch) // DRAIN_EVERY != (n * batch) // DRAIN_EVERY:
                store.drain()
    elapsed = time.process_time() - started
    gc.enable()
    return elapsed / len(data) * 1e9, collector.sent


def run(jobs: list[str], records: int, repeat: int, batch: int | None = BATCH
        ) -> dict[str, float]:
    """Print and return each job's median ns per record over ``repeat`` passes (the jobs
    interleaved: pass 1 of every job, then pass 2, …), ``batch`` records per call."""
    data = envelopes(records)
    times: dict[str, list[float]] = {job: [] for job in jobs}
    sent: dict[str, int] = {}
    for _ in range(repeat):
        for job in jobs:
            ns, sent[job] = _run(job, data, batch)
            times[job].append(ns)
    print(f"{len(data):,} records of {len({e.key for e in data}):,} keys, one partition, "
          f"{repeat} passes each, {'per record' if batch is None else f'batches of {batch:,}'}")
    for job in jobs:
        print(f"  {job:<9} {statistics.median(times[job]):>7,.0f} ns per record (least "
              f"{min(times[job]):,.0f}; {sent[job]:,} outputs)")
    return {job: statistics.median(values) for job, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default=",".join(JOBS),
                        help=f"comma-separated, of {', '.join(JOBS)}")
    parser.add_argument("--records", type=int, default=250_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--per-record", action="store_true",
                        help="call Windows.process per record instead of process_batch")
    args = parser.parse_args()
    unknown = [job for job in args.jobs.split(",") if job not in JOBS]
    if unknown:
        parser.error(f"unknown jobs {unknown}; choose from {', '.join(JOBS)}")
    run(args.jobs.split(","), args.records, args.repeat,
        None if args.per_record else BATCH)


if __name__ == "__main__":
    main()
