"""The enrichment verifier on hand-built streams; its truth is examples/enrichment/checker.py."""

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

PROFILES = [{"user": "u1", "ts": 10, "plan": "free"}, {"user": "u1", "ts": 20, "plan": "pro"}]
VIEWS = [{"user": "u1", "view_id": "v1", "ts": 5}, {"user": "u1", "view_id": "v2", "ts": 20},
         {"user": "u1", "view_id": "v3", "ts": 25}, {"user": "u2", "view_id": "v4", "ts": 7},
         {"user": "u2", "view_id": "v5", "ts": 8}]


def _checker() -> Any:
    return load_sibling(str(REPO / "examples" / "enrichment" / "drill.py"), "checker")


def _record(stream: str, key: str, value: dict[str, Any]) -> ProducerRecord:
    return ProducerRecord(stream, key.encode(), json.dumps(value).encode())


def _enriched(view: dict[str, Any], profile: dict[str, Any] | None) -> ProducerRecord:
    return _record("enriched-views", view["user"], {**view, "profile": profile})


def test_enrichment_verifier_diffs_profiles_and_order(spark: Any, tmp_path: Path) -> None:
    want = _checker().expected(PROFILES, VIEWS)
    assert {u: [(v["view_id"], v["profile"] and v["profile"]["ts"]) for v in views]
            for u, views in want.items()} == {
        "u1": [("v1", None), ("v2", 10), ("v3", 20)], "u2": [("v4", None), ("v5", None)]}
    shutil.copytree(REPO / "examples" / "enrichment", tmp_path / "enrichment",
                    ignore=shutil.ignore_patterns("data", "__pycache__"))
    job = tmp_path / "enrichment" / "job.toml"
    config = load_config(job)

    async def build(system: Any) -> None:
        await system.create_stream("page-views", 2)
        await system.create_stream("profiles", 2)
        await system.create_stream("enriched-views", 4)
        await system.produce([_record("profiles", p["user"], p) for p in PROFILES]
                             + [_record("page-views", v["user"], v) for v in VIEWS]
                             + [_record("profiles", "wm", {"watermark": 100}),
                                _record("page-views", "wm", {"watermark": 100})])
        await system.produce([
            _enriched(VIEWS[0], None), _enriched(VIEWS[2], PROFILES[1]),
            _enriched(VIEWS[1], PROFILES[0]),
            _enriched(VIEWS[3], {"user": "u2", "ts": 99}),
            _enriched({"user": "u3", "view_id": "v9", "ts": 1}, None)])

    on_system(config, build)
    report = verify_job(job, spark)

    assert (report.verifier, report.matched, report.missing, report.extra, report.wrong) == (
        "verify_enrichment", 3, 1, 2, 3)
    assert report.examples == {
        "missing": ["view:v5: expected profile none, output None"],
        "extra": ["order:u3: expected None, output v9", "view:v9: expected None, output "
                  "profile none"],
        "wrong": ["order:u1: expected v1,v2,v3, output v1,v3,v2",
                  "order:u2: expected v4,v5, output v4",
                  "view:v4: expected profile none, output profile 99"],
    }
