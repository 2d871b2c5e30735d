"""`sampan describe`: a job's plan from its job file alone — for a pipeline its stages,
operators, streams and stores, pinned here for a sample using most operators; for a task
job its task, streams and stores."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from framework.cli import main
from framework.commands.describe import describe_job
from framework.config import load_config

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

SHOP = """\
Job "shop": pipeline shop_pipeline:build, run by framework.pipelines.task:PipelineTask

Stage 0
  reads:  local.customers, local.orders
  writes: local.big-orders, local.shop-by-item-repartition
  table-0 (local.customers; 4 partitions; store customers) [shop_pipeline.py:24]
    --> join-table-6
  source-1 (local.orders; 4 partitions) [shop_pipeline.py:25]
    --> process-2
  process-2 (Dedupe; stores seen-orders) [shop_pipeline.py:25]
    --> branch-3
    <-- source-1
  branch-3 (1 predicate, then the rest) [shop_pipeline.py:26]
    --> join-table-6 (branch 0)
    --> merge-8 (branch 0)
    --> merge-8 (branch 1)
    <-- process-2
  join-table-6 (left, table local.customers in store customers) [shop_pipeline.py:27]
    --> to-7
    <-- branch-3 (branch 0)
    <-- table-0
  to-7 (to local.big-orders) [shop_pipeline.py:28]
    <-- join-table-6
  merge-8 [shop_pipeline.py:29]
    --> partition-by-9
    <-- branch-3 (branch 1)
    <-- branch-3 (branch 0)
  partition-by-9 (to local.shop-by-item-repartition) [shop_pipeline.py:29]
    --> intermediate-10
    <-- merge-8

Stage 1
  reads:  local.shop-by-item-repartition
  writes: local.item-counts, local.item-minutes
  intermediate-10 (local.shop-by-item-repartition; 4 partitions) [shop_pipeline.py:29]
    --> count-11
    --> window-13
    <-- partition-by-9
  count-11 (store item-counts) [shop_pipeline.py:30]
    --> to-12
    <-- intermediate-10
  to-12 (to local.item-counts) [shop_pipeline.py:30]
    <-- count-11
  window-13 (tumbling 60000 ms, store item-minutes) [shop_pipeline.py:31]
    --> to-14
    <-- intermediate-10
  to-14 (to local.item-minutes) [shop_pipeline.py:32]
    <-- window-13

Streams (partitions as the job file declares them; sampan run creates those missing):
  local.customers                 table         4 partitions
  local.orders                    source        4 partitions
  local.shop-by-item-repartition  intermediate  4 partitions, retention_ms 3600000
  local.big-orders                output        4 partitions
  local.item-counts               output        2 partitions
  local.item-minutes              output        2 partitions

Stores (one per task; a changelog has one partition per task):
  customers     rocksdb  table-0    changelog local.shop-customers-changelog
  item-counts   rocksdb  count-11   changelog local.shop-item-counts-changelog
  item-minutes  rocksdb  window-13  changelog local.shop-item-minutes-changelog
  seen-orders   rocksdb  process-2  changelog local.shop-seen-orders-changelog
"""


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """The sample pipeline job (tests/pipelines/shop) in a folder of its own."""
    shutil.copytree(HERE / "shop", tmp_path / "shop")
    return tmp_path / "shop" / "job.toml"


def test_describe_prints_the_stages_streams_and_stores_of_a_pipeline(
        shop: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["describe", str(shop)]) == 0
    assert capsys.readouterr().out == SHOP


def test_describe_code_adds_the_python_the_stages_were_compiled_into(shop: Path) -> None:
    text = describe_job(load_config(shop), code=True)
    code = text.split("Compiled stages:\n", 1)[1]
    assert code.startswith("def factory(rt):\n")
    assert "    def r1(env, c):  # reads local.orders\n" in code
    assert "c.send('local.shop-by-item-repartition', F9(k, v), v, timestamp=t)" in code


def test_describe_prints_a_task_jobs_task_streams_and_stores() -> None:
    assert describe_job(load_config(REPO / "examples" / "enrichment" / "job.toml")) == """\
Job "enrichment": task enrichment_task:EnrichmentTask

Reads:
  local.page-views (2 partitions)
  local.profiles (2 partitions)

Other declared streams (the task may write any of them):
  local.enriched-views (4 partitions)

Stores (one per task; a changelog has one partition per task):
  profiles       rocksdb  changelog local.enrichment-profiles-changelog
  waiting-views  rocksdb  changelog local.enrichment-waiting-views-changelog
  watermarks     rocksdb  changelog local.enrichment-watermarks-changelog
"""
