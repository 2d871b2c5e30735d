"""The pipeline examples of README.md and docs/pipelines.md, taken from the pages
themselves: README's pipeline form of the counter job gives the task form's outputs and
store, and the guide's example compiles to the plan the guide prints."""

from __future__ import annotations

import re
from pathlib import Path

from framework.api import load_task_class
from framework.commands.describe import describe_job
from framework.config import load_config
from framework.testing import run_pipeline, run_task

REPO = Path(__file__).resolve().parents[2]


def block(page: str, marker: str) -> str:
    """The fenced code block of ``page`` whose first line is ``marker``."""
    for found in re.findall(r"```\w*\n(.*?)```", (REPO / page).read_text(), flags=re.S):
        if found.startswith(marker):
            return str(found)
    raise AssertionError(f"{page} has no code block starting with {marker!r}")


def test_readmes_pipeline_form_of_the_counter_gives_the_task_forms_outputs(
        tmp_path: Path) -> None:
    (tmp_path / "counter_task.py").write_text(block("README.md", "# counter_task.py"))
    (tmp_path / "counter_pipeline.py").write_text(block("README.md", "# counter_pipeline.py"))
    task_job = block("README.md", "# counter.toml")
    (tmp_path / "counter.toml").write_text(task_job)
    (tmp_path / "pipeline.toml").write_text(task_job.replace(
        'task = "counter_task:CountTask"\ninputs = ["local.events"]\n',
        'pipeline = "counter_pipeline:build"\n'))
    records = [("local.events", key, {"amount": n}) for n, key in enumerate("abacab", 1)]
    config = load_config(tmp_path / "counter.toml")
    as_task = run_task(load_task_class(config), records, config=config)
    as_pipeline = run_pipeline(tmp_path / "pipeline.toml", records)
    assert [(m.stream, m.key, m.value) for m in as_pipeline.outputs] == [
        (m.stream, m.key, m.value) for m in as_task.outputs]
    assert as_pipeline.stores == as_task.stores == {"totals": {"a": 9, "b": 8, "c": 4}}


def test_the_guides_example_compiles_to_the_plan_the_guide_prints(tmp_path: Path) -> None:
    page = "docs/pipelines.md"
    (tmp_path / "views_pipeline.py").write_text(block(page, "# views_pipeline.py"))
    (tmp_path / "views.toml").write_text(block(page, "# views.toml"))
    config = load_config(tmp_path / "views.toml")
    assert describe_job(config) == block(page, 'Job "views"')
    result = run_pipeline(config, [("local.page-views", "u1", {"page": "home"}, 0, 1_000),
                                   ("local.page-views", "u2", {"page": "home"}, 0, 2_000)])
    assert result.last_values("local.views-per-page") == {"home": 2}
