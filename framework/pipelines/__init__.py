"""Pipelines: the high-level API over tasks — map, filter, re-key, aggregate, window and
join — compiled into an ordinary task job.

>>> from framework.pipelines import Pipeline
>>> p = Pipeline()
>>> (p.source("local.lines")
...   .flat_map(lambda key, line: [(word, 1) for word in line.split()])
...   .partition_by(lambda word, one: word, name="words")
...   .count(store="counts")
...   .to("local.word-counts"))
>>> [node.label for node in p.nodes]
['source-0', 'flat-map-1', 'partition-by-2', 'intermediate-3', 'count-4', 'to-5']

A job file names the function that builds it (``pipeline = "module:build"``); sampan
compiles it into stages, intermediate streams and stores (`sampan describe JOB` shows
them) and runs it as `PipelineTask`. See docs/pipelines.md.
"""

from framework.pipelines.builder import Emit, Pipeline, Step, Stream, Table
from framework.pipelines.graph import PipelineError
from framework.pipelines.plan import Plan, Stage

__all__ = ["Emit", "Pipeline", "PipelineError", "Plan", "Stage", "Step", "Stream", "Table"]
