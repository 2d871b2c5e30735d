"""The enrichment drill: seeded page views and profile updates with watermarks, checked
exactly by `checker`.

The workload runs on an event clock: mostly page views of Zipf-skewed users, sometimes a
profile update. Every record is produced at most `MAX_DELAY_MS` after its ``ts`` (so an
update may arrive after views it precedes, and the other way round), and every
`WATERMARK_EVERY_MS` the producer writes ``{"watermark": now - MAX_DELAY_MS}`` under one
marker key per partition (keys chosen for the *final* partition count, so they cover
every partition before and after each expansion).
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from framework.config import JobConfig
from framework.drill.scenario import Verdict, load_sibling
from framework.drill.verify import read_stream, store_state
from framework.systems.base import ProducerRecord, System
from framework.windows.watermarks import marker_keys, paced_workload

checker = load_sibling(__file__, "checker")

MAX_DELAY_MS = 1_000
"""A record is produced at most this long (in event time) after its ``ts``."""
WATERMARK_EVERY_MS = 2_000
STEP_MS = 5
"""Event time between two events."""
END_OF_TIME = 10**15
"""The last watermark: releases every waiting view."""
PLANS = ("free", "plus", "pro")
COUNTRIES = ("de", "fr", "jp", "br", "us")


def _record(stream: str, key: str, value: dict[str, Any]) -> ProducerRecord:
    ts = value.get("ts", value.get("watermark"))
    if ts is not None and ts >= END_OF_TIME:
        ts = None  # Kafka refuses timestamps over an hour ahead of its clock (Kafka 4 default)
    return ProducerRecord(stream, key.encode(), json.dumps(value).encode(), timestamp=ts)


class EnrichmentScenario:
    """Exactly ``records`` records: views and profile updates, then the final watermark."""

    expand = "page-views"
    initial_partitions = 2
    steps = (4, 8)

    def __init__(self, records: int, users: int, seed: int, partitions: int,
                 final_partitions: int) -> None:
        self.total = records
        self.partitions = partitions
        self.users = [f"user-{n:05d}" for n in range(users)]
        self.weights = [1.0 / (n + 1) ** 0.6 for n in range(users)]
        self.markers = {"profiles": marker_keys("profiles", partitions),
                        "page-views": marker_keys("page-views", final_partitions)}
        if records < 20 * sum(map(len, self.markers.values())):
            raise ValueError(f"--records {records} is too few for the enrichment drill")
        self.profiles: list[dict[str, Any]] = []  # ground truth, as produced
        self.views: list[dict[str, Any]] = []
        self._items = self._workload(random.Random(seed))

    def streams(self, initial_partitions: int) -> Mapping[str, int]:
        return {"page-views": initial_partitions, "profiles": self.partitions,
                "enriched-views": 4}

    def records(self, count: int) -> Sequence[ProducerRecord]:
        batch = list(itertools.islice(self._items, count))
        for record in batch:
            value = json.loads(record.value or b"{}")
            if "ts" in value:
                (self.profiles if record.stream == "profiles" else self.views).append(value)
        return batch

    def _round(self, watermark: int) -> list[ProducerRecord]:
        return [_record(stream, key, {"watermark": watermark})
                for stream, keys in self.markers.items() for key in keys]

    def _event(self, rng: random.Random, number: int, now: int, versions: dict[str, int]
               ) -> ProducerRecord:
        user = rng.choices(self.users, self.weights)[0]
        if rng.random() < 0.15:
            versions[user] = versions.get(user, 0) + 1
            return _record("profiles", user, {
                "user": user, "ts": now, "version": versions[user],
                "plan": rng.choice(PLANS), "country": rng.choice(COUNTRIES)})
        return _record("page-views", user, {"user": user, "view_id": f"view-{number:07d}",
                                            "ts": now, "url": f"/page/{rng.randrange(50)}"})

    def _workload(self, rng: random.Random) -> Iterator[ProducerRecord]:
        versions: dict[str, int] = {}

        def events(number: int, now: int) -> list[tuple[int, ProducerRecord]]:
            record = self._event(rng, number, now, versions)
            return [(now + rng.randrange(MAX_DELAY_MS + 1), record)]

        return paced_workload(
            self.total, events, self._round, step_ms=STEP_MS, max_delay_ms=MAX_DELAY_MS,
            every_ms=WATERMARK_EVERY_MS, reserve=1, end_of_time=END_OF_TIME)

    async def verify(self, config: JobConfig, system: System) -> Verdict:
        want = checker.expected(self.profiles, self.views)
        got: dict[str, list[dict[str, Any]]] = {}
        for rows in (await read_stream(system, "enriched-views")).values():
            for key, value in rows:
                got.setdefault(key.decode(), []).append(json.loads(value))
        verdict = compare_views(want, got)
        views = await store_state(system, config, "waiting-views")
        for partition, left in views.items():
            for view in left.values():  # the last watermark released every view
                verdict.wrong.setdefault(view["user"], f"a view still waits in task {partition}")
        held = {key: value for contents in (await store_state(system, config, "profiles")).values()
                for key, value in contents.items()}
        latest: dict[str, dict[str, Any]] = {}
        for version in self.profiles:
            if version["ts"] >= latest.get(version["user"], {"ts": -1})["ts"]:
                latest[version["user"]] = version
        for user, version in sorted(latest.items()):
            if held.get(f"{user}|{version['ts']:016d}") != version:
                verdict.wrong.setdefault(user, f"profile store lacks its latest version {version}")
        return verdict


def compare_views(want: Mapping[str, list[dict[str, Any]]],
                  got: Mapping[str, list[dict[str, Any]]]) -> Verdict:
    """Each user's enriched views exactly, in order: none missing, repeated or extra."""
    verdict = Verdict(keys=len(want))
    for user in sorted(set(want) | set(got)):
        wanted, emitted = want.get(user, []), got.get(user, [])
        if wanted == emitted:
            continue
        if len(wanted) != len(emitted):
            verdict.wrong[user] = f"{len(emitted)} enriched views, expected {len(wanted)}"
            continue
        first = next(i for i, (a, b) in enumerate(zip(wanted, emitted, strict=True)) if a != b)
        verdict.wrong[user] = f"view {first + 1} is {emitted[first]}, expected {wanted[first]}"
    return verdict


def scenario(options: Any) -> EnrichmentScenario:
    initial = options.initial_partitions or EnrichmentScenario.initial_partitions
    final = max(initial, *(options.steps or EnrichmentScenario.steps))
    return EnrichmentScenario(options.records, options.keys, options.seed, initial, final)
