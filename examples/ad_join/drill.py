"""The ad-join drill: a seeded auction workload with watermarks, checked exactly by `checker`.

The workload runs on an event clock. Each auction has at most one impression and up to
two clicks; some clicks come outside the window, some before the impression (in event
time or only in arrival order), some twice, some without any impression. Every record is
produced at most `MAX_DELAY_MS` after its ``ts``, and every `WATERMARK_EVERY_MS` the
producer writes ``{"watermark": now - MAX_DELAY_MS}`` under one marker key per partition
(keys chosen for the *final* partition count, so they cover every partition before and
after the expansion). That promise is what lets the task close windows exactly.
"""

from __future__ import annotations

import itertools
import json
import random
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ad_join_task import JOIN_WINDOW_MS

from framework.config import JobConfig
from framework.drill.scenario import Verdict, load_sibling
from framework.drill.verify import read_stream, store_state
from framework.systems.base import ProducerRecord, System
from framework.windows.watermarks import marker_keys, paced_workload

checker = load_sibling(__file__, "checker")

MAX_DELAY_MS = 1_000
"""A record is produced at most this long (in event time) after its ``ts``."""
WATERMARK_EVERY_MS = 2_000
STEP_MS = 25
"""Event time between two auctions."""
END_OF_TIME = 10**15
"""The last watermark: closes every window."""
CAMPAIGNS = 12
OUTPUTS = ("attributed-clicks", "late", "ctr")


def _record(stream: str, key: str, value: dict[str, Any]) -> ProducerRecord:
    ts = value.get("ts", value.get("watermark"))
    if ts is not None and ts >= END_OF_TIME:
        ts = None  # Kafka refuses timestamps over an hour ahead of its clock (Kafka 4 default)
    return ProducerRecord(stream, key.encode(), json.dumps(value).encode(), timestamp=ts)


class AdJoinScenario:
    """Exactly ``records`` records: auctions, then the final watermark."""

    expand = "clicks"
    initial_partitions = 4
    steps = (8,)
    checked = "results (attributed clicks, late clicks, campaign CTRs, empty join stores)"

    def __init__(self, records: int, seed: int, partitions: int, final_partitions: int
                 ) -> None:
        self.total = records
        self.workload = f"{records:,} records (impressions, clicks, watermarks)"
        self.partitions = partitions
        self.markers = {"impressions": marker_keys("impressions", partitions),
                        "clicks": marker_keys("clicks", final_partitions)}
        if records < 20 * sum(map(len, self.markers.values())):
            raise ValueError(f"--records {records} is too few for the ad_join drill")
        self.impressions: list[dict[str, Any]] = []  # ground truth, as produced
        self.clicks: list[dict[str, Any]] = []
        self._items = self._workload(random.Random(seed))

    def streams(self, initial_partitions: int) -> Mapping[str, int]:
        return {"impressions": self.partitions, "clicks": initial_partitions,
                **{stream: 4 for stream in OUTPUTS}}

    def records(self, count: int) -> Sequence[ProducerRecord]:
        batch = list(itertools.islice(self._items, count))
        for record in batch:
            value = json.loads(record.value or b"{}")
            if record.stream == "impressions" and "ts" in value:
                self.impressions.append(value)
            elif record.stream == "clicks" and "ts" in value:
                self.clicks.append(value)
        return batch

    def _round(self, watermark: int) -> list[ProducerRecord]:
        return [_record(stream, key, {"watermark": watermark})
                for stream, keys in self.markers.items() for key in keys]

    def _auction(self, rng: random.Random, number: int, now: int
                 ) -> list[tuple[int, ProducerRecord]]:
        """(produce-at, record) for one auction whose impression is at ``now``."""
        auction = f"auction-{number:06d}"
        out = []
        has_impression = rng.random() >= 0.03
        if has_impression:
            value = {"auction": auction, "campaign": f"campaign-{rng.randrange(CAMPAIGNS):02d}",
                     "ts": now}
            out.append((now + rng.randrange(MAX_DELAY_MS + 1),
                        _record("impressions", auction, value)))
        clicks = rng.choices((0, 1, 2), (50, 40, 10))[0] if has_impression else 1
        for n in range(clicks):
            ts = now - rng.randrange(1, 500) if rng.random() < 0.02 else (
                now + rng.randrange(int(JOIN_WINDOW_MS * 1.4)))
            click = _record("clicks", auction, {"auction": auction,
                                                "click_id": f"{auction}-{n}", "ts": ts})
            copies = 2 if rng.random() < 0.1 else 1  # a retried send: the same click twice
            out.extend((ts + rng.randrange(MAX_DELAY_MS + 1), click) for _ in range(copies))
        return out

    def _workload(self, rng: random.Random) -> Iterator[ProducerRecord]:
        return paced_workload(
            self.total, lambda number, now: self._auction(rng, number, now), self._round,
            step_ms=STEP_MS, max_delay_ms=MAX_DELAY_MS, every_ms=WATERMARK_EVERY_MS,
            reserve=5, end_of_time=END_OF_TIME)  # an auction makes at most 5 records

    async def verify(self, config: JobConfig, system: System) -> Verdict:
        want = checker.expected(self.impressions, self.clicks, JOIN_WINDOW_MS)
        verdict = Verdict(keys=len(want.attributed) + len(want.late) + len(want.ctr))
        for stream, wanted in (("attributed-clicks", want.attributed), ("late", want.late)):
            got = [value for rows in (await read_stream(system, stream)).values()
                   for _, value in rows]
            compare_clicks(verdict, stream, wanted, [json.loads(v) for v in got])
        changelog = config.changelog_stream("ctr").partition(".")[2]
        for where, totals in (("ctr stream", await last_partials(system, "ctr", by_key=True)),
                              ("ctr store", await last_partials(system, changelog))):
            for campaign in sorted(set(want.ctr) | set(totals)):
                if totals.get(campaign) != want.ctr.get(campaign):
                    verdict.wrong.setdefault(f"campaign {campaign}", (
                        f"{where} sums to {totals.get(campaign)}, "
                        f"expected {want.ctr.get(campaign)}"))
        for partition, kept in sorted((await store_state(system, config, "joined")).items()):
            verdict.keys += 1  # each task's join store: empty once the last watermark passed
            auctions = sorted(key[3:] for key in kept if key.startswith("j|"))
            if auctions:
                verdict.wrong[f"task {partition}'s join store"] = (
                    f"still keeps records of {len(auctions):,} auctions, e.g. {auctions[0]}")
        return verdict


def compare_clicks(verdict: Verdict, stream: str, wanted: Mapping[str, dict[str, Any]],
                   got: list[dict[str, Any]]) -> None:
    """Each wanted click exactly once with exactly its value; nothing else."""
    copies = Counter(value["click_id"] for value in got)
    values = {value["click_id"]: value for value in got}
    for click_id in sorted(set(wanted) | set(values)):
        if click_id not in values:
            problem = f"missing from {stream}"
        elif click_id not in wanted:
            problem = f"in {stream}, expected elsewhere"
        elif copies[click_id] > 1:
            problem = f"{copies[click_id]} times in {stream}"
        elif values[click_id] != wanted[click_id]:
            problem = f"{stream} has {values[click_id]}, expected {wanted[click_id]}"
        else:
            continue
        key = f"click {click_id}"
        verdict.wrong[key] = f"{verdict.wrong[key]}; {problem}" if key in verdict.wrong else problem


async def last_partials(system: System, stream: str, by_key: bool = False
                        ) -> dict[str, dict[str, int]]:
    """Σ over tasks of each task's last per-campaign counts: from the ``ctr`` stream (keys
    ``campaign|task``) or the store's changelog (one partition per task, keys campaign)."""
    totals: dict[str, dict[str, int]] = {}
    for partition, rows in (await read_stream(system, stream)).items():
        last = {(key.decode() if by_key else f"{key.decode()}|{partition}"): json.loads(value)
                for key, value in rows}
        for name, counts in last.items():
            total = totals.setdefault(name.split("|")[0], {"impressions": 0, "clicks": 0})
            total["impressions"] += counts["impressions"]
            total["clicks"] += counts["clicks"]
    return totals


def scenario(options: Any) -> AdJoinScenario:
    initial = options.initial_partitions or AdJoinScenario.initial_partitions
    final = max(initial, *(options.steps or AdJoinScenario.steps))
    return AdJoinScenario(options.records, options.seed, initial, final)
