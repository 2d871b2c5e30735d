"""The windowed-counts example: the task's windows, the checker, and the drill end to end
(page-views expanded 2 → 4 → 8 mid-window, every closed window checked exactly)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from framework.drill.options import DrillOptions
from framework.drill.run import run_drill
from framework.drill.scenario import load_sibling
from framework.testing import run_task

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "windowed_counts"
sys.path.insert(0, str(EXAMPLE))

from windowed_counts_task import MINUTE, WINDOW, WindowedCountsTask  # noqa: E402

expected = load_sibling(str(EXAMPLE / "drill.py"), "checker").expected

JOB = EXAMPLE / "job.toml"


def view(user: str, ts: int, partition: int = 0) -> tuple[str, str, dict[str, Any], int]:
    return ("local.page-views", user, {"user": user, "ts": ts}, partition)


def mark(watermark: int, partition: int = 0) -> tuple[str, str, dict[str, int], int]:
    return ("local.page-views", f"~wm-{partition}", {"watermark": watermark}, partition)


def windows(result: Any) -> list[tuple[str, int, int]]:
    return [(m.key, m.value["start"] // MINUTE, m.value["views"])
            for m in result.sent_to("local.views-per-user")]


def test_a_view_counts_in_five_hopping_windows_emitted_as_the_watermark_passes() -> None:
    result = run_task(WindowedCountsTask, [
        mark(0), view("u1", 4 * MINUTE + 1), view("u1", 5 * MINUTE), view("u2", 30_000),
        mark(5 * MINUTE),     # closes [0, 5): u2's view and u1's first
        mark(10 * MINUTE)], config=JOB)
    assert windows(result) == [("u1", 0, 1), ("u2", 0, 1),
                               ("u1", 1, 2), ("u1", 2, 2), ("u1", 3, 2), ("u1", 4, 2),
                               ("u1", 5, 1)]
    assert result.sent_to("local.late-views") == []
    assert [k for k in result.stores["views"] if k.startswith(("k|", "c|"))] == []


def test_a_view_behind_the_watermark_is_dead_lettered() -> None:
    result = run_task(WindowedCountsTask, [mark(2 * MINUTE), view("u1", MINUTE)], config=JOB)
    [late] = result.sent_to("local.late-views")
    assert (late.key, late.value["ts"], late.value["watermark"]) == ("u1", MINUTE, 2 * MINUTE)
    assert windows(result) == []


def test_checker_table() -> None:
    views = [{"user": "u", "ts": 0}, {"user": "u", "ts": MINUTE - 1},
             {"user": "u", "ts": 5 * MINUTE}, {"user": "v", "ts": 7 * MINUTE}]
    assert expected(views, WINDOW.size_ms, WINDOW.advance_ms) == {
        ("u", 0): 2, ("u", MINUTE): 1, ("u", 2 * MINUTE): 1, ("u", 3 * MINUTE): 1,
        ("u", 4 * MINUTE): 1, ("u", 5 * MINUTE): 1,
        ("v", 3 * MINUTE): 1, ("v", 4 * MINUTE): 1, ("v", 5 * MINUTE): 1,
        ("v", 6 * MINUTE): 1, ("v", 7 * MINUTE): 1}


async def test_drill_counts_every_window_exactly_while_page_views_expand_2_4_8(
        tmp_path: Path) -> None:
    report = await run_drill(DrillOptions(example="windowed_counts", records=3000, rate=1500,
                                          output=tmp_path / "drill", plot=False))
    assert report.exact, "\n".join(report.verdict.describe())
    assert [e.change for e in report.expansions] == ["local.page-views 2→4",
                                                     "local.page-views 4→8"]
    want = report.scenario.expected()
    # 2,760 views (the rest are watermark records), each in 5 windows (none cut off at 0)
    assert (len(report.scenario.views), len(want), sum(want.values())) == (2760, 5693,
                                                                            2760 * 5)
    assert report.verdict.keys == 5693


async def test_naive_grouper_splits_users_windows_across_tasks(tmp_path: Path) -> None:
    """Regrouping moves users (and marker keys) to new tasks that lack their windows."""
    report = await run_drill(DrillOptions(example="windowed_counts", records=3000, rate=1500,
                                          naive=True, output=tmp_path / "naive", plot=False))
    assert not report.exact
    assert any(key.startswith("window ") for key in report.verdict.wrong)
