"""Each job-file key is declared once, on its field; the digest and the TOML form of a
configuration are derived from those declarations and stay what they were before."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest

from framework.config import JobConfig, load_config, parse_config
from framework.config.declare import declared
from framework.config.model import TABLES
from framework.config.sections import (
    CoordinatorConfig,
    ErrorsConfig,
    MetricsConfig,
    QueriesConfig,
    RocksDBConfig,
    StoreConfig,
    StreamConfig,
    SystemConfig,
)
from framework.config.snapshot import job_file_change, load_snapshot, snapshot_config

REPO = Path(__file__).resolve().parents[2]
CONFIGS = (JobConfig, SystemConfig, StreamConfig, StoreConfig, RocksDBConfig, ErrorsConfig,
           CoordinatorConfig, MetricsConfig, QueriesConfig)

EXAMPLE_DIGESTS = {
    "examples/ad_join/job.toml":
        "ee6f83fb7beb22c05377bab3a0334a95abfbd202a6d25cffabcce11cbc2f71bb",
    "examples/enrichment/job.toml":  # since its profiles store became queryable (issue 49)
        "c70d266e42441a1cf190dbc62c031bd4fff1e5fb2d7ca17e2d000f89b432cfdb",
    "examples/enrichment/job_broadcast.toml":
        "c8e7879840ddd9303b4806cf7aed7890c02b20d2153facb347b99534c5ce6458",
    "examples/windowed_counts/job.toml":  # since its views store became queryable (issue 49)
        "bec4ea3f04cd19bf5b8357f9d69eecb380252add1b13920f1109b7ae36037549",
    "examples/wordcount/job.toml":  # since its counts store became queryable (issue 49)
        "a69621ff012bc12b66d9d496b4836560f8245979553f37dc0f774ee23afa791f",
    # the pipeline forms (issue 50 §3), pinned from their first commit
    "examples/ad_join/job_pipeline.toml":
        "f7ed5e8a61facc3c6732408e602a863fdceec2a875137b58f5cbf7ca8bae285f",
    "examples/enrichment/job_pipeline.toml":
        "d553761ca1c117fad5a380f7906861390fdbaf86b6f3affd79c953df0442988f",
    "examples/windowed_counts/job_pipeline.toml":
        "704ca6ba1100b59a163c26d95876a0b5de99e0a3e107e1103be6c4d37be6d8ee",
    "examples/wordcount/job_pipeline.toml":
        "c8cd3a54f180210e380b7961a2a874b65a7dbdb6cb2bbf679f5e28d0d887ec46",
}
"""`JobConfig.digest` of each example, computed on main before the keys were declared on
their fields: a worker compares digests, so a refactor must not change them."""

EVERY_KEY = """\
[job]
name = "full"
task = "full_task:FullTask"
inputs = ["meta.events", "kafka.clicks"]
broadcast_inputs = ["meta.rules"]
workers = 3
commit_interval_ms = 250
window_interval_ms = 500
input_idle_timeout_ms = 0
grouper = "system-stream-partition"
expansion = "regroup"
expansion_algorithm = "default"
data_dir = "elsewhere/state"
metadata_system = "meta"
write_buffer_max_keys = 5000
fetch_max_records = 200
store_restore_batch = 300
store_memory_mb = 0
task_timeout_ms = 0
standby_replicas = 1
guarantee = "at-least-once"

[systems.meta]
type = "local"
path = "log"
client_options = { busy_timeout_ms = 2000, synchronous = "FULL" }
retention_ms = 86400000
retention_bytes = 1000000
retention_mode = "drop-unread"

[systems.kafka]
type = "kafka"
bootstrap = "127.0.0.1:9092,127.0.0.1:9093"
client_options = { timeout_s = 5.0, namespace = "t-" }

[streams."meta.events"]
key_serde = "bytes"
value_serde = "msgpack"
partitions = 4
retention_ms = 1000
retention_bytes = 2000
retention_mode = "wait-for-readers"
start_position = 2026-05-01T12:00:00Z

[streams."meta.rules"]
compacted = true
start_position = "latest"

[streams."kafka.clicks"]
key_serde = "int64"
value_serde = "string"
partitions = 2
start_position = 1777636800000

[streams."meta.dead"]
value_serde = "bytes"

[stores.totals]
type = "rocksdb"
key_serde = "bytes"
value_serde = "msgpack"
changelog = false

[stores.totals.rocksdb]
block_cache_mb = 8
write_buffer_mb = 16
max_write_buffers = 3
compression = "zstd"
bloom_bits_per_key = 0

[stores.scratch]
type = "memory"

[errors]
policy = "skip"
process_policy = "dead-letter"
dead_letter_stream = "meta.dead"

[coordinator]
monitor_interval_ms = 100
worker_stop_timeout_ms = 200
worker_restart_backoff_ms = 300
max_worker_restarts = 4
crash_window_ms = 400
max_unreachable_ms = 0
model_changes = "restart"
rebalances = "eager"
assignor = "high-availability"
compaction_interval_ms = 0
retention_interval_ms = 700
lease_timeout_ms = 2000
session_timeout_ms = 3000
acceptable_recovery_lag = 5
max_warmup_replicas = 6
probing_rebalance_interval_ms = 7000
max_rebalance_wait_ms = 8000

[metrics]
enabled = false
bind = "0.0.0.0"
port = 9100
lag_interval_ms = 50
"""
"""A job file that sets every key to something other than its default."""

EVERY_KEY_DIGEST = "59f805ed9d3e48d68977aa9e4de4235acffa4ff1966846f007d1ff09c34f51ed"
"""Its digest, computed on main before the keys were declared on their fields."""

MINIMAL = """\
[job]
name = "minimal"
task = "m:T"
inputs = ["local.events"]

[systems.local]
type = "local"

[streams."local.events"]

[stores.totals]
"""


def _keys(cls: type[Any]) -> set[str]:
    return {key for _, _, key in declared(cls)}


def test_every_field_of_a_config_dataclass_is_a_declared_key_a_table_or_marked_derived(
) -> None:
    loose = [f"{cls.__name__}.{spec.name}" for cls in CONFIGS
             for spec in dataclasses.fields(cls)
             if not {"setting", "table", "derived"} & set(spec.metadata)]
    assert loose == []


def test_the_digest_of_every_example_job_file_is_the_one_main_computed() -> None:
    found = sorted(p.relative_to(REPO).as_posix() for p in REPO.glob("examples/*/*.toml"))
    assert found == sorted(EXAMPLE_DIGESTS)
    assert {name: load_config(REPO / name).digest for name in found} == EXAMPLE_DIGESTS


def test_the_digest_of_an_example_does_not_depend_on_its_folder(tmp_path: Path) -> None:
    shutil.copytree(REPO / "examples" / "wordcount", tmp_path / "wordcount")
    assert load_config(tmp_path / "wordcount" / "job.toml").digest == (
        EXAMPLE_DIGESTS["examples/wordcount/job.toml"])


def test_a_job_file_setting_every_key_keeps_the_digest_main_computed(tmp_path: Path) -> None:
    (tmp_path / "full.toml").write_text(EVERY_KEY)
    assert load_config(tmp_path / "full.toml").digest == EVERY_KEY_DIGEST


def test_a_key_added_since_the_digests_were_pinned_changes_the_digest_only_when_set(
        tmp_path: Path) -> None:
    """``job.expansion_merge_ms`` at its default keeps the pinned digest; set otherwise, it
    is part of the configuration the workers compare."""
    (tmp_path / "full.toml").write_text(EVERY_KEY)
    config = load_config(tmp_path / "full.toml")
    assert config.with_overrides(expansion_merge_ms=300000).digest == EVERY_KEY_DIGEST
    assert config.with_overrides(expansion_merge_ms=0).digest != EVERY_KEY_DIGEST


def test_to_dict_writes_every_declared_key_and_parses_back_to_the_same_config(
        tmp_path: Path) -> None:
    (tmp_path / "full.toml").write_text(EVERY_KEY)
    config = load_config(tmp_path / "full.toml")
    document = config.to_dict()
    assert set(document) == {"job", *TABLES}
    assert set(document["job"]) == _keys(JobConfig) - {"pipeline"}  # a task job has none
    assert set(document["coordinator"]) == _keys(CoordinatorConfig)
    assert set(document["metrics"]) == _keys(MetricsConfig)
    assert set(document["errors"]) == _keys(ErrorsConfig)
    assert set(document["systems"]["meta"]) == _keys(SystemConfig) - {"bootstrap"}
    assert set(document["systems"]["kafka"]) == {"type", "bootstrap", "client_options"}
    assert set(document["streams"]["meta.events"]) == _keys(StreamConfig)
    queryable = {"keyed_by", "key_to_input"}  # unset in EVERY_KEY: its digest is pinned
    assert set(document["queries"]) == _keys(QueriesConfig) - {"advertised_host", "token",
                                                                "token_file"}
    assert set(document["stores"]["totals"]) == _keys(StoreConfig) - queryable
    assert set(document["stores"]["totals"]["rocksdb"]) == _keys(RocksDBConfig)
    assert set(document["stores"]["scratch"]) == _keys(StoreConfig) - {"rocksdb"} - queryable
    assert parse_config(document, config.path) == config


@pytest.mark.parametrize("table", ["job", "coordinator", "metrics", "queries", "errors"])
def test_an_absent_key_takes_the_default_its_field_declares(tmp_path: Path,
                                                            table: str) -> None:
    (tmp_path / "job.toml").write_text(MINIMAL)
    config = load_config(tmp_path / "job.toml")
    section = config if table == "job" else getattr(config, table)
    derived = {"metadata_system", "guarantee", "data_dir"}  # checked below
    loaded = {spec.name: getattr(section, spec.name) for spec, setting, _ in
              declared(type(section))
              if setting.required is None and spec.name not in derived}
    assert loaded == {spec.name: setting.default_of(spec) for spec, setting, _ in
                      declared(type(section))
                      if setting.required is None and spec.name not in derived}
    assert (config.metadata_system, config.guarantee, config.data_dir) == (
        "local", "exactly-once", tmp_path / "state")


def test_an_absent_key_of_a_system_stream_or_store_takes_its_declared_default(
        tmp_path: Path) -> None:
    (tmp_path / "job.toml").write_text(MINIMAL)
    config = load_config(tmp_path / "job.toml")
    assert (config.system("local"), config.stream("local.events"), config.store("totals")) == (
        SystemConfig("local", "local", path=tmp_path / "data"),
        StreamConfig("local", "events"),
        StoreConfig("totals", rocksdb=RocksDBConfig()))


def test_a_snapshot_of_a_job_setting_every_key_loads_back_to_the_same_config(
        tmp_path: Path) -> None:
    (tmp_path / "full.toml").write_text(EVERY_KEY)
    config = load_config(tmp_path / "full.toml")
    loaded = load_snapshot(snapshot_config(config), config.path)
    assert (loaded, loaded.digest, job_file_change(config)) == (config, EVERY_KEY_DIGEST, None)
