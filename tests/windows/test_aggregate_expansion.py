"""Several aggregations per window stay exact while their input expands 2 → 4 → 8 with a
worker killed in between: `sampan run` with 2 workers on the local log, records-mode event
time, tumbling, hopping and session windows each computing four named results — every
window of every kind checked against a recomputation from the records produced."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

from jobs.runs import LocalJob
from jobs.windowed import MINUTE

from framework.systems.base import ProducerRecord

HERE = Path(__file__).resolve().parent
KEYS = [f"user-{n:02d}" for n in range(40)]
GAP, SIZE, ADVANCE, TUMBLE = 30_000, 5 * MINUTE, MINUTE, MINUTE
OUTPUTS = ("tumbling", "hopping", "sessions")

JOB = """\
[job]
name = "stats"
task = "stats_task:StatsTask"
inputs = ["local.events"]
workers = 2
commit_interval_ms = 100

[coordinator]
monitor_interval_ms = 300

[systems.local]
type = "local"
path = "data"

[streams."local.events"]
partitions = 2
[streams."local.tumbling"]
[streams."local.hopping"]
[streams."local.sessions"]
[streams."local.late"]

[stores.tumbling]
[stores.hopping]
[stores.sessions]
"""


def batch(rng: random.Random, start: int, end: int, count: int) -> list[ProducerRecord]:
    """``count`` records with event times in [start, end), produced in time order give or
    take 2 s (the windows' grace is 5 s: none is late)."""
    times = sorted(rng.randrange(start, end) for _ in range(count))
    jittered = sorted(times, key=lambda ts: ts + rng.randrange(2_000))
    return [ProducerRecord("events", key.encode(), json.dumps(
        {"ts": ts, "amount": rng.randrange(1, 100)}).encode(), timestamp=ts)
        for ts, key in ((ts, rng.choice(KEYS)) for ts in jittered)]


def closing(partitions: int) -> list[ProducerRecord]:
    """A watermark record in every partition at the end of time: closes every window."""
    return [ProducerRecord("events", b"~end", json.dumps({"watermark": 10**15}).encode(),
                           partition=p) for p in range(partitions)]


def stats(amounts: list[int]) -> dict[str, Any]:
    return {"views": len(amounts), "spent": sum(amounts), "top": max(amounts),
            "avg": sum(amounts) / len(amounts)}


def expected(records: list[dict[str, Any]]) -> dict[str, dict[tuple[Any, ...], Any]]:
    """Output → (key, start, end) → results, recomputed from the records by brute force."""
    windows: dict[str, dict[tuple[Any, ...], list[int]]] = {name: {} for name in OUTPUTS}
    by_key: dict[str, list[tuple[int, int]]] = {}
    for record in records:
        key, ts, amount = record["key"], record["ts"], record["amount"]
        by_key.setdefault(key, []).append((ts, amount))
        start = ts - ts % TUMBLE
        windows["tumbling"].setdefault((key, start, start + TUMBLE), []).append(amount)
        for start in range(ts - ts % ADVANCE, ts - SIZE, -ADVANCE):
            if start >= 0:
                windows["hopping"].setdefault((key, start, start + SIZE), []).append(amount)
    for key, points in by_key.items():
        points.sort()
        group = [points[0]]
        for ts, amount in points[1:]:
            if ts - group[-1][0] > GAP:
                windows["sessions"][(key, group[0][0], group[-1][0] + 1)] = [
                    a for _, a in group]
                group = []
            group.append((ts, amount))
        windows["sessions"][(key, group[0][0], group[-1][0] + 1)] = [a for _, a in group]
    return {name: {window: stats(amounts) for window, amounts in found.items()}
            for name, found in windows.items()}


async def test_aggregates_exact_across_2_4_8_with_a_killed_worker(tmp_path: Path) -> None:
    rng = random.Random(28)
    job = LocalJob(tmp_path / "job", JOB, {"stats_task.py": (HERE / "stats_task.py").read_text()})
    await job.create_streams({"events": 2, **{name: 2 for name in OUTPUTS}, "late": 1})
    produced: list[ProducerRecord] = []

    async def produce(records: list[ProducerRecord]) -> None:
        produced.extend(records)
        await job.send(records)

    await produce(batch(rng, 0, 4 * MINUTE, 400))
    job.start()
    try:
        await job.wait_epoch(1, workers=2)
        await job.wait(lambda: job.caught_up_on("events"), "the first batch committed")
        await job.expand_stream("events", 4)  # windows of every kind are open
        await produce(batch(rng, 4 * MINUTE, 8 * MINUTE, 400))
        await job.wait_epoch(2, workers=2)
        await produce(batch(rng, 8 * MINUTE, 12 * MINUTE, 400))
        victim = await job.kill_worker(1)  # mid-batch: its uncommitted work is redone
        await job.wait(lambda: job.caught_up_on("events"), "the third batch committed")

        async def replaced() -> bool:  # the batch may be committed before the kill: then
            pid = (await job.state()).status.worker_pids.get(1)  # the restart comes after
            return pid is not None and pid != victim

        await job.wait(replaced, "worker 1 restarted")
        await job.expand_stream("events", 8)
        await produce(batch(rng, 12 * MINUTE, 16 * MINUTE, 400))
        state = await job.wait_epoch(3, workers=2)
        assert [e.change for e in state.status.expansions] == [
            "local.events 2→4", "local.events 4→8"]
        await produce(closing(8))
        await job.wait(lambda: job.caught_up_on("events"), "everything committed")
        assert await job.stop() == 0
    finally:
        job.kill()
    records = [{"key": r.key.decode(), **json.loads(r.value)} for r in produced
               if r.key and r.value and b'"ts"' in r.value]
    want = expected(records)
    assert await job.values("late") == []
    for name in OUTPUTS:
        rows = await job.keyed_values(name)
        copies = Counter((key, v["start"], v["end"]) for key, v in rows)
        assert [w for w, n in copies.items() if n > 1] == [], f"{name}: emitted twice"
        got = {(key, v["start"], v["end"]): v["value"] for key, v in rows}
        assert all(v["final"] for _, v in rows)
        assert got == want[name], name
        assert len(got) == len(want[name]) > 100
        assert [k for k in await job.store_keys(name) if k.startswith("k|")] == []
