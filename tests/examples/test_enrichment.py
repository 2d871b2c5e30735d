"""The enrichment example: the task's rules, the checker, and both layouts drilled end to end."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from framework.drill.options import DrillOptions
from framework.drill.run import run_drill
from framework.drill.scenario import load_sibling
from framework.testing import run_task

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "enrichment"
sys.path.insert(0, str(EXAMPLE))

from enrichment_task import EnrichmentTask  # noqa: E402

expected_views = load_sibling(str(EXAMPLE / "drill.py"), "checker").expected

JOB = EXAMPLE / "job.toml"


def profile(user: str, ts: int, plan: str) -> tuple[str, str, dict[str, Any]]:
    return ("local.profiles", user, {"user": user, "ts": ts, "plan": plan})


def view(user: str, view_id: str, ts: int) -> tuple[str, str, dict[str, Any]]:
    return ("local.page-views", user, {"user": user, "view_id": view_id, "ts": ts})


def marks(watermark: int) -> list[tuple[str, str, dict[str, int]]]:
    return [("local.profiles", "~wm-p", {"watermark": watermark}),
            ("local.page-views", "~wm-v", {"watermark": watermark})]


def enriched(result: Any) -> list[tuple[str, str | None]]:
    """(view_id, plan of the profile it got) per enriched view, in emission order."""
    return [(m.value["view_id"], m.value["profile"] and m.value["profile"]["plan"])
            for m in result.sent_to("local.enriched-views")]


def test_view_waits_for_the_watermark_then_gets_the_profile_before_it() -> None:
    inputs = [*marks(0), profile("u1", 100, "free"), view("u1", "v1", 150),
              profile("u1", 120, "pro"), profile("u1", 200, "team")]  # 200 read before v1 left
    waiting = run_task(EnrichmentTask, [*inputs, *marks(150)], config=JOB)
    assert enriched(waiting) == []
    assert list(waiting.stores["waiting-views"]) == ["0000000000000150|v1"]
    done = run_task(EnrichmentTask, [*inputs, *marks(151)], config=JOB)
    assert enriched(done) == [("v1", "pro")]
    assert done.stores["waiting-views"] == {}


def test_update_at_the_same_ts_applies_to_later_views_only() -> None:
    inputs = [*marks(0), profile("u1", 100, "free"), view("u1", "v1", 100),
              view("u1", "v2", 101), view("u2", "v3", 100), *marks(500)]
    assert enriched(run_task(EnrichmentTask, inputs, config=JOB)) == [
        ("v1", None), ("v3", None), ("v2", "free")]  # in (ts, view_id) order


def test_window_drops_versions_no_future_view_can_see() -> None:
    inputs = [*marks(0), profile("u1", 100, "a"), profile("u1", 200, "b"),
              profile("u1", 300, "c"), profile("u2", 100, "x"), *marks(250)]
    result = run_task(EnrichmentTask, inputs, config=JOB, windows=1)
    assert sorted(result.stores["profiles"]) == [
        "u1|0000000000000200", "u1|0000000000000300", "u2|0000000000000100"]


def test_checker_table() -> None:
    out = expected_views(
        [{"user": "u", "ts": 20, "plan": "pro"}, {"user": "u", "ts": 10, "plan": "free"}],
        [{"user": "u", "view_id": "b", "ts": 20}, {"user": "u", "view_id": "a", "ts": 20},
         {"user": "u", "view_id": "c", "ts": 21}, {"user": "w", "view_id": "d", "ts": 30}])
    assert [(v["view_id"], v["profile"]) for v in out["u"]] == [
        ("a", {"user": "u", "ts": 10, "plan": "free"}),
        ("b", {"user": "u", "ts": 10, "plan": "free"}),
        ("c", {"user": "u", "ts": 20, "plan": "pro"})]
    assert out["w"] == [{"user": "w", "view_id": "d", "ts": 30, "profile": None}]


def _assert_exact_run(report: Any) -> None:
    assert report.exact, "\n".join(report.verdict.describe())
    assert [e.change for e in report.expansions] == ["local.page-views 2→4"]
    want = expected_views(report.scenario.profiles, report.scenario.views)
    assert (len(report.scenario.profiles), len(report.scenario.views)) == (472, 2468)
    assert report.verdict.keys == len(want) == 200
    assert sum(v["profile"] is None for views in want.values() for v in views) == 815


async def test_drill_co_partitioned_profiles_exact_while_page_views_expand(tmp_path: Path
                                                                          ) -> None:
    report = await run_drill(DrillOptions(example="enrichment", records=3000, rate=1500,
                                          keys=200, steps=(4,), output=tmp_path / "d",
                                          plot=False))
    _assert_exact_run(report)


async def test_drill_broadcast_profiles_exact_while_page_views_expand(tmp_path: Path
                                                                       ) -> None:
    """`sampan drill --example enrichment --job job_broadcast.toml`: profiles broadcast."""
    report = await run_drill(DrillOptions(example="enrichment", job_file="job_broadcast.toml",
                                          records=3000, rate=1500, keys=200, steps=(4,),
                                          output=tmp_path / "d", plot=False))
    assert "broadcast_inputs = [\"local.profiles\"]" in (tmp_path / "d/job/job.toml").read_text()
    _assert_exact_run(report)


async def test_naive_grouper_loses_and_misenriches_views(tmp_path: Path) -> None:
    """Regrouping moves users' views away from their profiles and their marker keys."""
    report = await run_drill(DrillOptions(example="enrichment", records=3000, rate=1500,
                                          keys=200, steps=(4,), naive=True,
                                          output=tmp_path / "n", plot=False))
    assert not report.exact
    assert report.verdict.keys == 200
    assert all(key.startswith("user-") for key in report.verdict.wrong)
