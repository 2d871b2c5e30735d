"""`sampan drill --form pipeline|both`: every example's pipeline form drilled on the local
log, its input expanded while it runs, exact like its task form."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from framework.drill.options import DrillOptions
from framework.drill.run import run_drill
from framework.errors import ConfigError
from framework.systems.local.system import LocalSystem


@pytest.mark.timeout(600)  # two CLI drills end to end; on a loaded machine they take minutes
def test_drill_cli_form_both_runs_the_task_then_the_pipeline_and_both_are_exact(
        tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "framework.cli", "drill", "--form", "both", "--records", "2000",
         "--keys", "100", "--rate", "2000", "--steps", "4", "--no-plot",
         "--output", str(tmp_path / "d")], capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stdout + done.stderr
    task, pipeline = done.stdout.split("\nsampan drill — ")
    assert task.startswith("sampan drill — wordcount on local, 2 workers,")
    assert pipeline.startswith("wordcount pipeline on local, 2 workers,")
    for report in (task, pipeline):
        assert "verdict: EXACT — all 100 keys" in report
        assert "expansion local.words 2→4" in report
    assert (tmp_path / "d" / "pipeline" / "job" / "wordcount_pipeline.py").is_file()
    assert 'pipeline = "wordcount_pipeline:build"' in (
        tmp_path / "d" / "pipeline" / "job" / "job.toml").read_text()


@pytest.mark.parametrize(("example", "options"), [
    ("ad_join", {}),
    ("enrichment", {"keys": 200, "steps": (4,)}),
    ("windowed_counts", {}),
])
async def test_each_examples_pipeline_form_drills_exactly(tmp_path: Path, example: str,
                                                          options: dict[str, Any]) -> None:
    report = await run_drill(DrillOptions(example=example, form="pipeline", records=3000,
                                          rate=1500, output=tmp_path / "d", plot=False,
                                          **options))
    assert report.exact, "\n".join(report.verdict.describe())
    assert report.verdict.keys > 0
    steps = options.get("steps") or report.scenario.steps
    assert [e.change.split()[0] for e in report.expansions] == (
        [f"local.{report.scenario.expand}"] * len(steps))
    assert report.text().startswith(f"sampan drill — {example} pipeline on local,")


def test_form_pipeline_picks_the_pipeline_job_file_and_an_unknown_form_is_refused() -> None:
    assert DrillOptions(example="wordcount", form="pipeline").job_file == "job_pipeline.toml"
    assert DrillOptions(example="enrichment", form="pipeline",
                        job_file="job_broadcast.toml").job_file == "job_broadcast.toml"
    with pytest.raises(ConfigError, match="--form 'sql': expected task, pipeline or both"):
        DrillOptions(form="sql").validate()


REPARTITIONING = '''\
from framework.pipelines import Pipeline


def build():
    p = Pipeline()
    (p.source("words")
      .partition_by(lambda word, record: word, name="by-word")
      .count(store="counts", result=lambda n, record: {"count": n, "seq": record["seq"]})
      .to("word-counts"))
    return p
'''


async def test_a_pipeline_drill_waits_for_its_intermediate_stream_to_be_read(
        tmp_path: Path) -> None:
    """Word count re-keyed through an intermediate stream: the drill's catch-up counts the
    records the job wrote there as inputs still to read, not as records produced."""
    mine = tmp_path / "rekeyed"
    shutil.copytree(Path(__file__).resolve().parents[2] / "examples" / "wordcount", mine,
                    ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    (mine / "rekeyed_pipeline.py").write_text(REPARTITIONING)
    job = (mine / "job_pipeline.toml").read_text()
    (mine / "job_pipeline.toml").write_text(job.replace("wordcount_pipeline:build",
                                                        "rekeyed_pipeline:build"))
    report = await run_drill(DrillOptions(example_dir=mine, form="pipeline", records=2000,
                                          keys=100, rate=2000, steps=(4,), workers=1,
                                          output=tmp_path / "out", plot=False))
    assert report.exact, "\n".join(report.verdict.describe())
    assert report.verdict.keys == 100
    assert report.timeline is not None  # sampled from the start, before the stream existed
    assert len(report.timeline.samples) > 2
    data = LocalSystem("local", tmp_path / "out" / "job" / "data")
    try:
        rekeyed = await data.offsets("wordcount-by-word-repartition")
    finally:
        await data.close()
    assert sum(span.end for span in rekeyed.values()) == 2000
