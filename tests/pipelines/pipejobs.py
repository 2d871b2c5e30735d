"""Helpers of the pipelines' end-to-end tests: the `exact_pipeline` job as a `sampan run`
(`jobs.runs.CountJob`'s process handling, on the local log or Kafka) or as hosts, its traffic with
its truth, and the checks of every output record.

The checks derive what each stage must have written from what the stage before it wrote:
a re-keyed stream's records of one key are in the order of its partitions — a key's
records move to a higher partition as the stream grows (``p → p + k·n``), so its
partitions ascending are its generations — and every aggregate, window and join output
is checked against the records the job read, one by one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.runs import CountJob

from framework.drill.verify import read_stream
from framework.partitioner import partition_for_key
from framework.systems.base import ProducerRecord

HERE = Path(__file__).resolve().parent
WINDOW_MS = 1000
GRACE_MS = 600_000
PAGES = [f"page-{n:02d}" for n in range(12)]
USERS = [f"u{n:03d}" for n in range(30)]


def job_text(name: str, system: str, prefix: str, *, bootstrap: str | None = None,
             guarantee: str | None = None, workers: int = 2, extra: str = "") -> str:
    """The job file of `exact_pipeline` on ``system`` (its streams named ``prefix…``)."""
    where = (f'type = "kafka"\nbootstrap = "{bootstrap}"' if system == "kafka"
             else 'type = "local"\npath = "data"')
    streams = "".join(f'[streams."{system}.{prefix}{s}"]\npartitions = 2\n\n' for s in (
        "events", "clicks", "page-sums", "page-windows", "attributed"))
    line = f'guarantee = "{guarantee}"\n' if guarantee else ""
    return f"""\
[job]
name = "{name}"
pipeline = "exact_pipeline:build"
workers = {workers}
commit_interval_ms = 100
{line}{extra}
[coordinator]
monitor_interval_ms = 300
worker_stop_timeout_ms = 20000
worker_restart_backoff_ms = 100
# on several hosts, a joining host's warmups become active at the next probe (the
# default's 60 s was most of the two-host test's time)
probing_rebalance_interval_ms = 2000

[systems.{system}]
{where}

{streams}"""


def write_pipeline(folder: Path, system: str, prefix: str) -> None:
    """`exact_pipeline.py` next to the job file, reading ``system``'s ``prefix…`` streams."""
    folder.mkdir(parents=True, exist_ok=True)
    text = (HERE / "exact_pipeline.py").read_text()
    text = text.replace('SYSTEM = "local"\n', f'SYSTEM = "{system}"\n', 1)
    text = text.replace('PREFIX = ""\n', f'PREFIX = "{prefix}"\n', 1)
    (folder / "exact_pipeline.py").write_text(text)


class PipelineJob(CountJob):
    """`exact_pipeline` run by `sampan run` (`CountJob`'s process handling), on the local
    log or on Kafka."""

    def __init__(self, folder: Path, name: str, *, system: str = "local",
                 bootstrap: str | None = None, guarantee: str | None = None,
                 prefix: str = "", **options: Any) -> None:
        self.prefix = prefix
        self._text = job_text(name, system, prefix, bootstrap=bootstrap,
                              guarantee=guarantee, **options)
        write_pipeline(folder, system, prefix)
        super().__init__(folder, name, {})
        self.system_name = system
        (folder / "count_task.py").unlink()  # the count job's task: not this job's
        self.traffic = Traffic()

    def write(self, name: str, inputs: Any, **options: Any) -> None:
        self.path.write_text(self._text)
        self.reload()

    def stream(self, name: str) -> str:
        """The name inside the system of the job's stream ``name`` (``events``, …)."""
        return f"{self.prefix}{name}"

    def intermediate(self, name: str) -> str:
        """The name inside the system of the intermediate stream ``name``."""
        return f"{self.config.name}-{name}-repartition"

    async def send(self, count: int) -> None:
        """``count`` more events (and their clicks) into the job's inputs."""
        records = self.traffic.records(self, count)
        await self.call(lambda s: s.produce(records))

    async def flush(self) -> None:
        """One far-future event per final partition of by-page: the windows close."""
        count = (await self.call(lambda s: s.partition_counts([self.intermediate("by-page")])
                                 ))[self.intermediate("by-page")]
        records = self.traffic.flush(self, count)
        await self.call(lambda s: s.produce(records))

    async def read(self, stream: str) -> dict[int, list[tuple[bytes, bytes]]]:
        return await self.call(lambda s: read_stream(s, stream))  # type: ignore[no-any-return]

    async def output_count(self, stream: str) -> int:
        return sum(r.end for r in (await self.call(lambda s: s.offsets(stream))).values())

    async def checked(self, *, exactly_once: bool, windows: bool = True) -> list[str]:
        """Every problem with the job's streams and outputs ([] when all is exact);
        ``windows=False`` leaves out the windows (before a flush none closed)."""
        found = {name: await self.read(self.stream(name))
                 for name in ("page-sums", "page-windows", "attributed")}
        by_page = await self.read(self.intermediate("by-page"))
        by_user = await self.read(self.intermediate("clicks-by-user"))
        if not windows:
            found["page-windows"] = {}
        return problems(self.traffic, by_page, by_user, found, exactly_once=exactly_once,
                        windows=windows)


async def feed(job: PipelineJob, stop: asyncio.Event) -> int:
    """40 events (and their clicks) every 50 ms until ``stop``; the batches sent."""
    batches = 0
    while not stop.is_set():
        await job.send(40)
        batches += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.05)
    return batches


async def grown_to(job: PipelineJob, counts: dict[str, int]) -> int:
    """Until the job's model has ``counts`` and every worker runs it; its epoch."""
    async def there() -> bool:
        state = await job.state()
        model = state.model
        return (model is not None and all(model.partition_counts.get(s) == n
                                          for s, n in counts.items())
                and all(w in state.workers and state.workers[w].epoch == model.epoch
                        and state.workers[w].stopped_ms is None
                        for w in range(model.workers)))
    await job.wait(there, f"the model of {counts} running on every worker", timeout=90)
    model = (await job.state()).model
    assert model is not None
    return model.epoch


async def drained(job: PipelineJob) -> None:
    """Until every event has its running sum and, after the flush, every window closed."""
    events = len(job.traffic.events)

    async def summed() -> bool:
        return await job.output_count(job.stream("page-sums")) >= events
    await job.wait(summed, f"{events} page sums", timeout=120)
    await job.flush()
    windows = sum(map(len, job.traffic.windows().values()))

    async def closed() -> bool:
        return await job.output_count(job.stream("page-windows")) >= windows
    await job.wait(closed, f"{windows} closed windows", timeout=120)


@dataclass
class Traffic:
    """Events with strictly increasing event times (10 ms apart, from now: a broker's
    retention would delete records stamped long ago) over 30 users and 12 pages, a click
    for every third one (1 ms after it); the truth of what was sent."""

    seed: int = 5
    start_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    events: list[dict[str, Any]] = field(default_factory=list)
    clicks: list[dict[str, Any]] = field(default_factory=list)
    flushed: list[str] = field(default_factory=list)

    def records(self, job: PipelineJob, count: int) -> list[ProducerRecord]:
        rng = random.Random(f"{self.seed}-{len(self.events)}")
        seen = Counter(e["user"] for e in self.events)
        batch = []
        for _ in range(count):
            user = rng.choice(USERS)
            seen[user] += 1
            ts = self.start_ms + 10 * (len(self.events) + 1)
            event = {"user": user, "n": seen[user], "page": rng.choice(PAGES),
                     "amount": rng.randint(1, 9), "ts": ts}
            self.events.append(event)
            batch.append(_record(job.stream("events"), user, event, ts))
            if len(self.events) % 3 == 0:
                click = {"id": f"c{len(self.clicks):05d}", "user": user, "n": event["n"],
                         "ts": ts + 1}
                self.clicks.append(click)
                batch.append(_record(job.stream("clicks"), click["id"], click, ts + 1))
        return batch

    def flush(self, job: PipelineJob, partitions: int) -> list[ProducerRecord]:
        """An event past every window and its grace (ten minutes ahead: within what a
        broker accepts) for each partition of by-page."""
        pages: dict[int, str] = {}
        n = 0
        while len(pages) < partitions:
            page = f"flush-{n:03d}"
            pages.setdefault(partition_for_key(page.encode(), partitions), page)
            n += 1
        ts = self.start_ms + 10 * len(self.events) + GRACE_MS + 2 * WINDOW_MS
        self.flushed = sorted(pages.values())
        return [_record(job.stream("events"), "flush", {"user": "flush", "n": i + 1,
                                                         "page": page, "amount": 0, "ts": ts},
                        ts) for i, page in enumerate(self.flushed)]

    def windows(self) -> dict[str, list[dict[str, Any]]]:
        """Per page, each window's final count, by start."""
        counts: dict[str, Counter[int]] = defaultdict(Counter)
        for event in self.events:
            counts[event["page"]][event["ts"] // WINDOW_MS * WINDOW_MS] += 1
        return {page: [{"start": s, "end": s + WINDOW_MS, "value": n, "final": True}
                       for s, n in sorted(c.items())] for page, c in counts.items()}


def _record(stream: str, key: str, value: dict[str, Any], ts: int) -> ProducerRecord:
    return ProducerRecord(stream, key.encode(), json.dumps(value).encode(), timestamp=ts)


def by_key(rows: dict[int, list[tuple[bytes, bytes]]]) -> dict[str, list[Any]]:
    """Each key's values in the order the job reads them: partitions ascending (a key's
    partition only grows with the stream's count), each in offset order."""
    found: dict[str, list[Any]] = defaultdict(list)
    for partition in sorted(rows):
        for key, value in rows[partition]:
            found[key.decode()].append(json.loads(value))
    return dict(found)


def problems(truth: Traffic, by_page_rows: dict[int, list[tuple[bytes, bytes]]],
             by_user_rows: dict[int, list[tuple[bytes, bytes]]],
             outputs: dict[str, dict[int, list[tuple[bytes, bytes]]]], *,
             exactly_once: bool, windows: bool = True) -> list[str]:
    """What is wrong, stage by stage: the re-keyed streams against the inputs, each
    output against the records the stage read. ``exactly_once``: nothing appears twice;
    otherwise a record may appear again only as a replay (at least once)."""
    found: list[str] = []
    flushed = set(truth.flushed)
    by_page = {k: v for k, v in by_key(by_page_rows).items() if k not in flushed}
    by_user = by_key(by_user_rows)
    found += _rekeyed("by-page", by_page, {(e["page"], e["user"], e["n"]) for e in truth.events},
                      lambda page, e: (page, e["user"], e["n"]), exactly_once, ordered=True)
    # a user's clicks come from every partition of clicks (keyed by click id): no order
    found += _rekeyed("clicks-by-user", by_user, {(c["user"], c["id"]) for c in truth.clicks},
                      lambda user, c: (user, c["id"]), exactly_once, ordered=False)
    sums = {k: v for k, v in by_key(outputs["page-sums"]).items() if k not in flushed}
    found += _sums(by_page, sums, exactly_once)
    if windows:
        closed = {k: v for k, v in by_key(outputs["page-windows"]).items() if k not in flushed}
        found += _windows(by_page, closed, exactly_once)
    found += _joins(truth, by_key(outputs["attributed"]), exactly_once)
    return found


def _rekeyed(name: str, stream: dict[str, list[Any]], expected: set[Any], identity: Any,
             exactly_once: bool, *, ordered: bool) -> list[str]:
    """Every input record in the re-keyed stream (once, under exactly-once); with
    ``ordered``, a source key's records in their order within each new key (one task
    wrote them all)."""
    seen = Counter(identity(key, value) for key, values in stream.items() for value in values)
    lost = expected - set(seen)
    extra = set(seen) - expected
    repeated = sorted(k for k, n in seen.items() if n > 1)
    found = []
    if lost or extra:
        found.append(f"{name}: {len(lost)} records lost (e.g. {sorted(lost)[:3]}), "
                     f"{len(extra)} unexpected (e.g. {sorted(extra)[:3]})")
    if exactly_once and repeated:
        found.append(f"{name}: {len(repeated)} records twice (e.g. {repeated[:3]})")
    for key, values in stream.items() if ordered else ():
        firsts: dict[str, list[int]] = defaultdict(list)
        for value in values:
            if "n" in value and value["n"] not in firsts[value["user"]]:
                firsts[value["user"]].append(value["n"])
        disordered = [u for u, ns in firsts.items() if ns != sorted(ns)]
        if disordered:
            found.append(f"{name}: {key}'s records of {disordered[:3]} out of order")
    return found


def _replayed(indices: list[int], total: int, exactly_once: bool) -> str | None:
    """What is wrong with outputs answering expected outputs ``indices`` (in output order)
    of ``total``: under exactly-once exactly 0..total-1; at least once, each either the
    next new one or a repeat of one already emitted (a replay), all of them there."""
    if exactly_once:
        return None if indices == list(range(total)) else (
            f"outputs answer {_shown(indices)}, expected 0..{total - 1} once each in order")
    high = -1
    for index in indices:
        if index > high + 1:
            return f"output for record {index} came before record {high + 1}'s"
        high = max(high, index)
    if high != total - 1:
        return f"outputs for records {high + 1}..{total - 1} missing"
    return None


def _shown(indices: list[int]) -> str:
    return str(indices) if len(indices) < 12 else f"{indices[:10]} … ({len(indices)})"


def _sums(by_page: dict[str, list[Any]], sums: dict[str, list[Any]],
          exactly_once: bool) -> list[str]:
    """Per page, the running sum of the records in the order the stage read them, one
    output each naming its record (sums only grow, so a sum names its place)."""
    found = []
    for page in sorted({*by_page, *sums}):
        running, expected = 0, []
        for event in by_page.get(page, []):
            running += event["amount"]
            expected.append({"sum": running, "user": event["user"], "n": event["n"]})
        place = {e["sum"]: i for i, e in enumerate(expected)}
        outputs = sums.get(page, [])
        wrong = [o for o in outputs if o["sum"] not in place or expected[place[o["sum"]]] != o]
        if wrong:
            found.append(f"page-sums {page}: {len(wrong)} outputs match no running sum, "
                         f"e.g. {wrong[0]}")
            continue
        problem = _replayed([place[o["sum"]] for o in outputs], len(expected), exactly_once)
        if problem:
            found.append(f"page-sums {page}: {problem}")
    return found


def _windows(by_page: dict[str, list[Any]], windows: dict[str, list[Any]],
             exactly_once: bool) -> list[str]:
    """Per page, one final count per window of the records the stage read, in window
    order (at least once: a close may be emitted again, the same)."""
    found = []
    for page in sorted({*by_page, *windows}):
        counts: Counter[int] = Counter(e["ts"] // WINDOW_MS * WINDOW_MS
                                       for e in by_page.get(page, []))
        expected = [{"start": s, "end": s + WINDOW_MS, "value": n, "final": True}
                    for s, n in sorted(counts.items())]
        got = windows.get(page, [])
        if not exactly_once:
            got = [w for i, w in enumerate(got) if w not in got[:i]]
        if got != expected:
            first = next(((g, e) for g, e in zip(got, expected, strict=False) if g != e), None)
            found.append(f"page-windows {page}: {len(got)} results, expected "
                         f"{len(expected)}; first difference (got, expected): {first}")
    return found


def _joins(truth: Traffic, attributed: dict[str, list[Any]], exactly_once: bool) -> list[str]:
    """One join per click: its event's number and its id, under the click's user."""
    expected = Counter((c["user"], c["n"], c["id"]) for c in truth.clicks)
    got = Counter((user, j["n"], j["click"]) for user, js in attributed.items() for j in js)
    if exactly_once and got != expected:
        return [f"attributed: {sum((got - expected).values())} unexpected or repeated, "
                f"{sum((expected - got).values())} missing"]
    if not exactly_once and set(got) != set(expected):
        return [f"attributed: {len(set(got) - set(expected))} unexpected, "
                f"{len(set(expected) - set(got))} missing"]
    return []

