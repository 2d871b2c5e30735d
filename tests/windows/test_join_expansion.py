"""The interval join stays exact while either input expands: `sampan run` with 2 workers on
the local log, ``right`` 2 → 4, then ``left`` 2 → 4 and both to 8, a worker killed in
between — every joined pair and every unjoined left record checked against a
recomputation from the records produced, each exactly once."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

from jobs.runs import LocalJob

from framework.systems.base import ProducerRecord

HERE = Path(__file__).resolve().parent
KEYS = [f"k{n:02d}" for n in range(30)]
WITHIN = 5_000

JOB = """\
[job]
name = "joins"
task = "join_task:JoinTask"
inputs = ["local.left", "local.right"]
workers = 2
commit_interval_ms = 100

[coordinator]
monitor_interval_ms = 300

[systems.local]
type = "local"
path = "data"

[streams."local.left"]
partitions = 2
[streams."local.right"]
partitions = 2
[streams."local.joined"]
[streams."local.late"]

[stores.joined]
"""


class Workload:
    """Both sides' records, in time order give or take 2 s (the join's grace is 3 s)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.records: list[dict[str, Any]] = []

    def batch(self, start: int, end: int, count: int) -> list[ProducerRecord]:
        rng = self.rng
        times = sorted(rng.randrange(start, end) for _ in range(count))
        out = []
        for ts in sorted(times, key=lambda ts: ts + rng.randrange(2_000)):
            record = {"side": rng.choice(("left", "right")), "key": rng.choice(KEYS),
                      "ts": ts, "id": len(self.records)}
            self.records.append(record)
            out.append(ProducerRecord(record["side"], record["key"].encode(),
                                      json.dumps({"id": record["id"]}).encode(), timestamp=ts))
        return out

    def expected(self) -> Counter[tuple[Any, ...]]:
        """(key, left id, right id or None) for every pair and unjoined left record."""
        found: Counter[tuple[Any, ...]] = Counter()
        rights = [r for r in self.records if r["side"] == "right"]
        for left in (r for r in self.records if r["side"] == "left"):
            matches = [r["id"] for r in rights if r["key"] == left["key"]
                       and left["ts"] - WITHIN <= r["ts"] <= left["ts"] + WITHIN]
            for right in matches or [None]:
                found[(left["key"], left["id"], right)] += 1
        return found


def closing(counts: dict[str, int]) -> list[ProducerRecord]:
    """A watermark record in every partition of both sides at the end of time."""
    return [ProducerRecord(side, b"~end", json.dumps({"watermark": 10**15}).encode(),
                           partition=p) for side, n in counts.items() for p in range(n)]


async def test_join_exact_while_either_input_expands_with_a_killed_worker(
        tmp_path: Path) -> None:
    work = Workload(seed=4)
    job = LocalJob(tmp_path / "job", JOB, {"join_task.py": (HERE / "join_task.py").read_text()})
    await job.create_streams({"left": 2, "right": 2, "joined": 2, "late": 1})
    minute = 60_000
    await job.send(work.batch(0, minute, 300))  # one transaction: both sides at once
    job.start()
    try:
        await job.wait_epoch(1, workers=2)
        await job.wait(lambda: job.caught_up_on("left", "right"), "the first batch")
        await job.expand_stream("right", 4)  # records of both sides are kept
        await job.send(work.batch(minute, 2 * minute, 300))
        await job.wait_epoch(2, workers=2)
        await job.kill_worker(0)
        await job.send(work.batch(2 * minute, 3 * minute, 300))
        await job.wait(lambda: job.caught_up_on("left", "right"), "the third batch")
        await job.expand_stream("left", 4)  # now the other side
        await job.send(work.batch(3 * minute, 4 * minute, 300))
        await job.wait_epoch(3, workers=2)
        await job.expand_stream("left", 8)
        await job.expand_stream("right", 8)
        await job.send(work.batch(4 * minute, 5 * minute, 300))
        state = await job.wait_expansions({"local.left 4→8", "local.right 4→8"}, workers=2)
        assert job.changes(state) == {"local.right 2→4", "local.left 2→4", "local.left 4→8",
                                      "local.right 4→8"}
        await job.send(closing({"left": 8, "right": 8}))
        await job.wait(lambda: job.caught_up_on("left", "right"), "everything committed")
        assert await job.stop() == 0
    finally:
        job.kill()
    assert await job.values("late") == []
    got = Counter((key, v["left"]["id"], v["right"] and v["right"]["id"])
                  for key, v in await job.keyed_values("joined"))
    want = work.expected()
    assert got == want
    assert sum(1 for _, _, right in want if right is None) > 50  # unjoined lefts, too
    assert sum(1 for _, _, right in want if right is not None) > 300
    assert [k for k in await job.store_keys("joined") if k.startswith("j|")] == []
