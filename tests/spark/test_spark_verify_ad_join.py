"""The ad-join verifier on hand-built streams; its truth is examples/ad_join/checker.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from sparkjobs import REPO, on_system

from framework.config import load_config
from framework.drill.scenario import load_sibling
from framework.spark.verify import verify_job
from framework.systems.base import ProducerRecord

IMPRESSIONS = [{"auction": "a1", "campaign": "c1", "ts": 100},
               {"auction": "a2", "campaign": "c1", "ts": 200},
               {"auction": "a3", "campaign": "c2", "ts": 300}]
CLICKS = [{"auction": "a1", "click_id": "k1", "ts": 150},
          {"auction": "a1", "click_id": "k1", "ts": 150},
          {"auction": "a2", "click_id": "k2", "ts": 5000},
          {"auction": "a3", "click_id": "k3", "ts": 400},
          {"auction": "a9", "click_id": "k4", "ts": 100}]


def _checker() -> Any:
    return load_sibling(str(REPO / "examples" / "ad_join" / "drill.py"), "checker")


def _record(stream: str, key: str, value: dict[str, Any]) -> ProducerRecord:
    return ProducerRecord(stream, key.encode(), json.dumps(value).encode())


def test_ad_join_verifier_diffs_clicks_and_ctr(spark: Any, tmp_path: Path) -> None:
    want = _checker().expected(IMPRESSIONS, CLICKS, 2000)
    assert (sorted(want.attributed), sorted(want.late), want.ctr) == (
        ["k1", "k3"], ["k2", "k4"],
        {"c1": {"impressions": 2, "clicks": 1}, "c2": {"impressions": 1, "clicks": 1}})
    shutil.copytree(REPO / "examples" / "ad_join", tmp_path / "ad_join",
                    ignore=shutil.ignore_patterns("data", "__pycache__"))
    job = tmp_path / "ad_join" / "job.toml"
    config = load_config(job)

    async def build(system: Any) -> None:
        for stream in ("impressions", "clicks", "attributed-clicks", "late", "ctr"):
            await system.create_stream(stream, 4)
        await system.produce(
            [_record("impressions", i["auction"], i) for i in IMPRESSIONS]
            + [_record("clicks", c["auction"], c) for c in CLICKS]
            + [_record("impressions", "wm", {"watermark": 500}),
               _record("clicks", "wm", {"watermark": 500})])
        await system.produce([
            _record("attributed-clicks", "a1", {**CLICKS[0], "campaign": "c1",
                                                "impression_ts": 100}),
            _record("late", "a2", CLICKS[2]),
            _record("late", "a9", CLICKS[4]),
            _record("late", "a7", {"auction": "a7", "click_id": "k5", "ts": 1}),
            _record("ctr", "c1|Partition 0", {"campaign": "c1", "impressions": 1, "clicks": 0}),
            _record("ctr", "c1|Partition 0", {"campaign": "c1", "impressions": 1, "clicks": 1}),
            _record("ctr", "c1|Partition 1", {"campaign": "c1", "impressions": 1, "clicks": 0}),
            _record("ctr", "c2|Partition 0", {"campaign": "c2", "impressions": 1, "clicks": 0}),
        ])

    on_system(config, build)
    report = verify_job(job, spark)

    assert (report.verifier, report.matched, report.missing, report.extra, report.wrong) == (
        "verify_ad_join", 4, 1, 1, 1)
    assert report.examples == {
        "missing": ["click:k3: expected attributed c2 300, output None"],
        "extra": ["click:k5: expected None, output late"],
        "wrong": ["ctr:c2: expected impressions=1 clicks=1, output impressions=1 clicks=0"],
    }
