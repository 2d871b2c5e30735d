"""Where drills find examples: installed ones by entry point, a user's own by folder."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from framework.drill.examples import ENTRY_POINT_GROUP, find_example, installed_examples
from framework.drill.options import DrillOptions
from framework.drill.run import run_drill
from framework.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def test_every_example_folder_is_registered_under_the_entry_point_group() -> None:
    folders = sorted(p.parent.name for p in (REPO / "examples").glob("*/drill.py"))
    assert list(installed_examples()) == folders == [
        "ad_join", "enrichment", "windowed_counts", "wordcount"]
    assert {name: find_example(name) for name in folders} == {
        name: REPO / "examples" / name for name in folders}


def test_unknown_example_names_the_installed_ones_and_example_dir() -> None:
    with pytest.raises(ConfigError, match=re.escape(
            "--example 'nope': no drillable example of that name; installed: ad_join, "
            f"enrichment, windowed_counts, wordcount (entry point group {ENTRY_POINT_GROUP}). "
            "For a folder of your own, pass --example-dir DIR")):
        find_example("nope")


def test_example_dir_without_drill_module_or_job_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=re.escape(
            f"--example-dir {tmp_path} has no drill.py defining scenario(options)")):
        find_example("ignored", folder=tmp_path)
    (tmp_path / "drill.py").write_text("")
    (tmp_path / "other.toml").write_text("")
    with pytest.raises(ConfigError, match=re.escape(
            f"--job 'job.toml': --example-dir {tmp_path} has no such job file; it has: "
            "other.toml")):
        find_example("ignored", folder=tmp_path)


async def test_a_users_own_example_folder_drills_exactly(tmp_path: Path) -> None:
    """A copy of word count under another name, outside the package: found by its folder."""
    mine = tmp_path / "my_counts"
    shutil.copytree(REPO / "examples" / "wordcount", mine,
                    ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    options = DrillOptions(example_dir=mine, records=1000, keys=50, rate=5000, steps=(4,),
                           workers=1, monitor_interval_ms=200, output=tmp_path / "out",
                           plot=False)
    report = await run_drill(options)
    assert report.exact, "\n".join(report.verdict.describe())
    assert report.verdict.keys == 50
    assert [e.change for e in report.expansions] == ["local.words 2→4"]
    assert report.text().startswith("sampan drill — my_counts on local, 1 worker,")
    assert not (tmp_path / "out" / "job" / "__init__.py").exists()
