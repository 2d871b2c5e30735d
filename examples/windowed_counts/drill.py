"""The windowed-counts drill: seeded page views with watermarks, every closed window
checked exactly by `checker`.

The workload runs on an event clock (`STEP_MS` per view, from `START_MS`) over `--keys` users with a
skewed popularity. Every view is produced at most `MAX_DELAY_MS` after its ``ts`` (so
views arrive out of order), and every `WATERMARK_EVERY_MS` the producer writes
``{"watermark": now - MAX_DELAY_MS}`` under one marker key per partition — keys chosen
for the *final* partition count, so they land in every partition before and after each
expansion. The last watermark (`END_OF_TIME`) closes every window.
"""

from __future__ import annotations

import itertools
import json
import random
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from windowed_counts_task import WINDOW

from framework.config import JobConfig
from framework.drill.scenario import Verdict, load_sibling
from framework.drill.verify import read_stream, store_state
from framework.systems.base import ProducerRecord, System
from framework.windows.watermarks import marker_keys, paced_workload

checker = load_sibling(__file__, "checker")

MAX_DELAY_MS = 5_000
"""A view is produced at most this long (in event time) after its ``ts``."""
WATERMARK_EVERY_MS = 10_000
STEP_MS = 100
"""Event time between two events: the default 30,000 records span about 46 minutes."""
END_OF_TIME = 10**15
"""The last watermark: closes every window."""
START_MS = 3_600_000
"""Event time of the first view (01:00 on day one, so no window is cut off at 0)."""


def _record(key: str, value: dict[str, Any]) -> ProducerRecord:
    ts = value.get("ts", value.get("watermark"))
    if ts is not None and ts >= END_OF_TIME:
        ts = None  # Kafka refuses timestamps over an hour ahead of its clock (Kafka 4 default)
    return ProducerRecord("page-views", key.encode(), json.dumps(value).encode(), timestamp=ts)


class WindowedCountsScenario:
    """Exactly ``records`` records: page views, watermark rounds, the final watermark."""

    expand = "page-views"
    initial_partitions = 2
    steps = (4, 8)

    def __init__(self, records: int, users: int, seed: int, final_partitions: int) -> None:
        self.total = records
        self.users = [f"user-{n:05d}" for n in range(users)]
        self.weights = [1.0 / (n + 1) ** 0.5 for n in range(users)]
        self.markers = marker_keys("page-views", final_partitions)
        if records < 20 * len(self.markers):
            raise ValueError(f"--records {records} is too few for the windowed_counts drill")
        self.views: list[dict[str, Any]] = []  # ground truth, as produced
        self._items = self._workload(random.Random(seed))

    def streams(self, initial_partitions: int) -> Mapping[str, int]:
        return {"page-views": initial_partitions, "views-per-user": 4, "late-views": 1}

    def records(self, count: int) -> Sequence[ProducerRecord]:
        batch = list(itertools.islice(self._items, count))
        for record in batch:
            value = json.loads(record.value or b"{}")
            if "ts" in value:
                self.views.append(value)
        return batch

    def _round(self, watermark: int) -> list[ProducerRecord]:
        at = watermark if watermark >= END_OF_TIME else START_MS + watermark
        return [_record(key, {"watermark": at}) for key in self.markers]

    def _workload(self, rng: random.Random) -> Iterator[ProducerRecord]:
        def events(number: int, now: int) -> list[tuple[int, ProducerRecord]]:
            user = rng.choices(self.users, self.weights)[0]
            view = {"user": user, "ts": START_MS + now, "page": f"/page/{rng.randrange(40)}"}
            return [(now + rng.randrange(MAX_DELAY_MS + 1), _record(user, view))]

        return paced_workload(
            self.total, events, self._round, step_ms=STEP_MS, max_delay_ms=MAX_DELAY_MS,
            every_ms=WATERMARK_EVERY_MS, reserve=1, end_of_time=END_OF_TIME)

    def expected(self) -> dict[tuple[str, int], int]:
        """(user, window start) → views, for the views produced so far."""
        return checker.expected(self.views, WINDOW.size_ms, WINDOW.advance_ms)

    async def verify(self, config: JobConfig, system: System) -> Verdict:
        want = self.expected()
        verdict = Verdict(keys=len(want))
        emitted: Counter[tuple[str, int]] = Counter()
        got: dict[tuple[str, int], dict[str, Any]] = {}
        for rows in (await read_stream(system, "views-per-user")).values():
            for _, value in rows:
                window = json.loads(value)
                emitted[(window["user"], window["start"])] += 1
                got[(window["user"], window["start"])] = window
        for user, start in sorted(set(want) | set(got)):
            name = f"window {user} [{start}, {start + WINDOW.size_ms})"
            wanted = want.get((user, start))
            found = got.get((user, start))
            if found is None:
                verdict.wrong[name] = f"never emitted, expected {wanted} views"
            elif wanted is None:
                verdict.wrong[name] = f"emitted with {found['views']} views, expected none"
            elif emitted[(user, start)] > 1:
                verdict.wrong[name] = f"emitted {emitted[(user, start)]} times"
            elif (found["views"], found["end"]) != (wanted, start + WINDOW.size_ms):
                verdict.wrong[name] = f"{found['views']} views, expected {wanted}"
        late = sum(len(rows) for rows in (await read_stream(system, "late-views")).values())
        if late:
            verdict.wrong["late-views"] = f"{late} views judged late, expected none"
        for partition, left in (await store_state(system, config, "views")).items():
            open_windows = [key for key in left if key.startswith(("k|", "c|"))]
            if open_windows:  # the last watermark closed every window and expired it
                verdict.wrong[f"store views of changelog partition {partition}"] = (
                    f"{len(open_windows)} entries left, e.g. {open_windows[0]!r}")
        return verdict


def scenario(options: Any) -> WindowedCountsScenario:
    initial = options.initial_partitions or WindowedCountsScenario.initial_partitions
    final = max(initial, *(options.steps or WindowedCountsScenario.steps))
    return WindowedCountsScenario(options.records, options.keys, options.seed, final)
