"""Each example's two forms — the hand-written task (`job.toml`) and the pipeline
(`job_pipeline.toml`) — fed the same input, the example drill's own seeded workload, give
the same outputs: every record, stream, key, value and order, and the same stores.

Both run in process (`framework.testing.run_task` / `run_pipeline`) with the job files'
serdes; the input records are placed in partitions by key as a producer would.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from framework.config import load_config
from framework.drill.options import DrillOptions
from framework.drill.scenario import load_scenario
from framework.partitioner import partition_for_key
from framework.testing import TaskRunResult, run_pipeline, run_task

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

FORMS = {
    # example: (task module, task class, input partitions, drill options)
    "wordcount": ("wordcount_task", "WordCountTask", {"words": 2},
                  {"records": 2_000, "keys": 60}),
    "windowed_counts": ("windowed_counts_task", "WindowedCountsTask", {"page-views": 2},
                        {"records": 2_000, "keys": 40}),
    "ad_join": ("ad_join_task", "AdJoinTask", {"impressions": 4, "clicks": 4},
                {"records": 3_000}),
    "enrichment": ("enrichment_task", "EnrichmentTask", {"page-views": 2, "profiles": 2},
                   {"records": 2_000, "keys": 50}),
}


def workload(example: str, partitions: dict[str, int], options: dict[str, Any]
             ) -> list[tuple[str, str, Any, int, int]]:
    """The example drill's workload as input records, each in its key's partition."""
    scenario = load_scenario(example, DrillOptions(example=example, **options))
    inputs = []
    for record in scenario.records(options["records"]):
        assert record.key is not None and record.value is not None
        partition = (record.partition if record.partition is not None
                     else partition_for_key(record.key, partitions[record.stream]))
        inputs.append((f"local.{record.stream}", record.key.decode(),
                       json.loads(record.value), partition, record.timestamp or 0))
    return inputs


def sent(result: TaskRunResult) -> list[tuple[str, Any, Any]]:
    return [(m.stream, m.key, m.value) for m in result.outputs]


def both_forms(example: str) -> tuple[TaskRunResult, TaskRunResult]:
    module, name, partitions, options = FORMS[example]
    folder = EXAMPLES / example
    sys.path.insert(0, str(folder))
    try:
        task = getattr(__import__(module), name)
    finally:
        sys.path.remove(str(folder))
    inputs = workload(example, partitions, options)
    by_task = run_task(task, inputs, config=folder / "job.toml", windows=1)
    by_pipeline = run_pipeline(load_config(folder / "job_pipeline.toml"), inputs, windows=1)
    return by_task, by_pipeline


@pytest.mark.parametrize("example", sorted(FORMS))
def test_the_pipeline_form_sends_what_the_task_sends_and_keeps_the_same_stores(
        example: str) -> None:
    by_task, by_pipeline = both_forms(example)
    assert len(sent(by_task)) > 100  # the workload exercised the example
    assert sent(by_pipeline) == sent(by_task)
    assert by_pipeline.stores == by_task.stores
