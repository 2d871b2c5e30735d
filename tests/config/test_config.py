"""The job file: documented defaults, derived names, every error kind with its exact message."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from framework.api import StreamTask, load_task_class
from framework.config import (
    CoordinatorConfig,
    ErrorsConfig,
    JobConfig,
    RocksDBConfig,
    StartPosition,
    StoreConfig,
    StreamConfig,
    StreamRef,
    SystemConfig,
    load_config,
    parse_config,
)
from framework.errors import ConfigError, TaskLoadError
from framework.importing import load_expansion_algorithm
from groupers import DefaultPartitionExpansionAlgorithm

PINNED = """\
[job]
name = "counter"
task = "counter_task:CountTask"     # module:Class, importable from the job file's folder
inputs = ["local.events"]
workers = 2
commit_interval_ms = 1000

[systems.local]
type = "local"
path = "data"                        # relative to the job file

[streams."local.events"]
key_serde = "string"
value_serde = "json"

[streams."local.totals"]
key_serde = "string"
value_serde = "json"

[stores.totals]                      # RocksDB, logged to a changelog by default
key_serde = "string"
value_serde = "json"
"""

COUNT_TASK = """\
from framework.api import StreamTask

class CountTask(StreamTask):
    def process(self, envelope, collector, coordinator):
        pass

def not_a_class():
    pass

class Plain:
    pass
"""


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Run in a fresh folder; imported job modules and sys.path entries do not leak."""
    monkeypatch.chdir(tmp_path)
    path, modules = sys.path[:], set(sys.modules)
    yield
    sys.path[:] = path
    for name in set(sys.modules) - modules:
        del sys.modules[name]


def write(name: str, text: str) -> Path:
    path = Path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def error_of(name: str, text: str) -> str:
    write(name, text)
    with pytest.raises(ConfigError) as caught:
        load_config(name)
    return str(caught.value)


def pinned_with(extra: str = "", *, replace: tuple[str, str] | None = None) -> str:
    text = PINNED if replace is None else PINNED.replace(*replace)
    return text + extra


# --- the pinned file ---------------------------------------------------------------------


def test_pinned_file_loads_with_the_documented_defaults(tmp_path: Path) -> None:
    write("counter.toml", PINNED)
    assert load_config("counter.toml") == JobConfig(
        path=tmp_path / "counter.toml",
        name="counter",
        task="counter_task:CountTask",
        inputs=("local.events",),
        broadcast_inputs=(),
        workers=2,
        commit_interval_ms=1000,
        window_interval_ms=1000,
        input_idle_timeout_ms=30000,
        grouper="partition",
        expansion="fixed-tasks",
        expansion_algorithm_spec="default",
        data_dir=tmp_path / "state",
        metadata_system="local",
        write_buffer_max_keys=100000,
        fetch_max_records=1000,
        store_restore_batch=10000,
        errors=ErrorsConfig(policy="fail", dead_letter_stream=None),
        coordinator=CoordinatorConfig(
            monitor_interval_ms=2000, worker_stop_timeout_ms=10000,
            worker_restart_backoff_ms=500, max_worker_restarts=5, assignor="sticky"),
        systems={"local": SystemConfig("local", "local", tmp_path / "data", None, {})},
        streams={
            "local.events": StreamConfig("local", "events", "string", "json", None, False),
            "local.totals": StreamConfig("local", "totals", "string", "json", None, False),
        },
        stores={"totals": StoreConfig("totals", "rocksdb", "string", "json", True,
                                      RocksDBConfig())},
    )


def test_pinned_file_derives_the_metadata_stream_names() -> None:
    write("counter.toml", PINNED)
    config = load_config("counter.toml")
    assert (config.coordinator_stream, config.changelog_stream("totals")) == (
        "local.__sampan-counter-coordinator", "local.counter-totals-changelog")
    assert (config.coordinator_ref, config.changelog_ref("totals")) == (
        StreamRef("local", "__sampan-counter-coordinator"),
        StreamRef("local", "counter-totals-changelog"))
    assert config.stream("local.events").ref == StreamRef.parse("local.events")


def test_rocksdb_options_are_read_checked_and_round_trip() -> None:
    write("counter.toml", PINNED + """
[stores.totals.rocksdb]
block_cache_mb = 256
compression = "zstd"
bloom_bits_per_key = 0
""")
    config = load_config("counter.toml")
    assert config.store("totals").rocksdb == RocksDBConfig(block_cache_mb=256,
                                                           compression="zstd",
                                                           bloom_bits_per_key=0)
    assert config.to_dict()["stores"]["totals"]["rocksdb"]["compression"] == "zstd"
    assert parse_config(config.to_dict(), config.path) == config
    assert config.with_overrides({"stores.totals.rocksdb.write_buffer_mb": 8}).store(
        "totals").rocksdb == RocksDBConfig(block_cache_mb=256, write_buffer_mb=8,
                                           compression="zstd", bloom_bits_per_key=0)


def test_bad_rocksdb_options_are_named_with_their_key() -> None:
    write("counter.toml", PINNED.replace("[stores.totals]", '[stores.totals]\ntype = "memory"')
          + """
[stores.totals.rocksdb]
compression = "gzip"
max_write_buffers = 1
cache = 3
""")
    with pytest.raises(ConfigError) as error:
        load_config("counter.toml")
    message = str(error.value)
    assert 'stores.totals.rocksdb: only a store of type = "rocksdb" has RocksDB options' in (
        message)
    assert "stores.totals.rocksdb.compression: expected one of" in message
    assert "stores.totals.rocksdb.max_write_buffers: expected an integer ≥ 2, got 1" in message
    assert "stores.totals.rocksdb.cache: unknown key" in message


def test_a_job_with_a_logged_store_is_stateful() -> None:
    write("counter.toml", PINNED)
    config = load_config("counter.toml")
    assert (config.stateful, config.logged_stores) == (True, ("totals",))


def test_a_job_whose_stores_have_no_changelog_is_stateless() -> None:
    write("counter.toml", pinned_with("changelog = false\n"))
    config = load_config("counter.toml")
    assert (config.stateful, config.logged_stores) == (False, ())


def test_a_job_without_stores_is_stateless() -> None:
    text = PINNED[: PINNED.index("[stores.totals]")]
    write("counter.toml", text)
    assert load_config("counter.toml").stateful is False


def test_stream_lookup_splits_system_and_stream() -> None:
    write("counter.toml", PINNED)
    stream = load_config("counter.toml").stream("local.totals")
    assert (stream.system, stream.stream, stream.qualified) == ("local", "totals", "local.totals")


def test_input_streams_lists_inputs_then_broadcast_inputs() -> None:
    write("counter.toml", pinned_with(
        '[streams."local.rules"]\n',
        replace=('inputs = ["local.events"]',
                 'inputs = ["local.events"]\nbroadcast_inputs = ["local.rules"]')))
    config = load_config("counter.toml")
    assert [s.qualified for s in config.input_streams] == ["local.events", "local.rules"]


def test_an_undeclared_stream_lookup_says_how_to_declare_it(tmp_path: Path) -> None:
    write("counter.toml", PINNED)
    with pytest.raises(ConfigError) as caught:
        load_config("counter.toml").stream("local.clicks")
    assert str(caught.value) == (
        f'stream "local.clicks" is not declared in {tmp_path}/counter.toml; add a '
        '[streams."local.clicks"] table (declared: local.events, local.totals)')


def test_an_undeclared_system_lookup_says_how_to_declare_it(tmp_path: Path) -> None:
    write("counter.toml", PINNED)
    with pytest.raises(ConfigError) as caught:
        load_config("counter.toml").system("kafka")
    assert str(caught.value) == (
        f'system "kafka" is not declared in {tmp_path}/counter.toml; add a [systems.kafka] '
        "table (declared: local)")


# --- paths ---------------------------------------------------------------------------------


def test_paths_are_relative_to_the_job_file_not_the_working_directory(tmp_path: Path) -> None:
    write("jobs/counter/counter.toml", pinned_with(replace=('path = "data"',
                                                            'path = "../shared/log"')))
    config = load_config("jobs/counter/counter.toml")
    assert (config.root, config.data_dir, config.system("local").path) == (
        tmp_path / "jobs/counter", tmp_path / "jobs/counter/state", tmp_path / "jobs/shared/log")


def test_an_absolute_data_dir_is_kept(tmp_path: Path) -> None:
    write("counter.toml", pinned_with(replace=("workers = 2", f'workers = 2\ndata_dir = '
                                                              f'"{tmp_path}/elsewhere"')))
    assert load_config("counter.toml").data_dir == tmp_path / "elsewhere"


def test_local_system_path_defaults_to_data(tmp_path: Path) -> None:
    write("counter.toml", pinned_with(replace=('path = "data"', "")))
    assert load_config("counter.toml").system("local").path == tmp_path / "data"


def test_metadata_system_defaults_to_the_first_inputs_system() -> None:
    write("counter.toml", pinned_with(
        '[systems.kafka]\ntype = "kafka"\nbootstrap = "127.0.0.1:9092"\n'
        '[streams."kafka.clicks"]\n',
        replace=('inputs = ["local.events"]', 'inputs = ["kafka.clicks", "local.events"]')))
    config = load_config("counter.toml")
    assert (config.metadata_system, config.coordinator_stream) == (
        "kafka", "kafka.__sampan-counter-coordinator")


def test_metadata_system_can_be_named() -> None:
    write("counter.toml", pinned_with(
        '[systems.meta]\ntype = "local"\npath = "meta"\n',
        replace=("workers = 2", 'workers = 2\nmetadata_system = "meta"')))
    assert load_config("counter.toml").changelog_stream("totals") == (
        "meta.counter-totals-changelog")


def test_a_kafka_system_keeps_bootstrap_and_client_options() -> None:
    write("counter.toml", pinned_with(
        '[systems.kafka]\ntype = "kafka"\nbootstrap = "a:9092,b:9093"\n'
        "client_options = { timeout_s = 10 }\n"))
    assert load_config("counter.toml").system("kafka") == SystemConfig(
        "kafka", "kafka", None, "a:9092,b:9093", {"timeout_s": 10})


# --- digest and overrides -----------------------------------------------------------------


def test_digest_does_not_depend_on_key_order_or_spelled_out_defaults() -> None:
    write("a/counter.toml", PINNED)
    reordered = """\
[stores.totals]
value_serde = "json"
key_serde = "string"
changelog = true

[streams."local.totals"]
value_serde = "json"

[streams."local.events"]
value_serde = "json"
key_serde = "string"

[systems.local]
path = "data"
type = "local"

[job]
commit_interval_ms = 1000
workers = 2
inputs = ["local.events"]
task = "counter_task:CountTask"
name = "counter"
grouper = "partition"
"""
    write("b/counter.toml", reordered)
    assert load_config("a/counter.toml").digest == load_config("b/counter.toml").digest


def test_digest_changes_when_a_value_changes() -> None:
    write("a/counter.toml", PINNED)
    write("b/counter.toml", PINNED.replace("workers = 2", "workers = 3"))
    assert load_config("a/counter.toml").digest != load_config("b/counter.toml").digest


def test_with_overrides_changes_job_keys_and_revalidates() -> None:
    write("counter.toml", PINNED)
    config = load_config("counter.toml").with_overrides(workers=4)
    assert (config.workers, config.name) == (4, "counter")


def test_with_overrides_takes_dotted_and_tuple_key_paths() -> None:
    write("counter.toml", PINNED)
    config = load_config("counter.toml").with_overrides({
        "coordinator.assignor": "high-availability",
        ("streams", "local.events", "partitions"): 8,
    })
    assert (config.coordinator.assignor, config.stream("local.events").partitions) == (
        "high-availability", 8)


def test_with_overrides_refuses_an_invalid_value(tmp_path: Path) -> None:
    write("counter.toml", PINNED)
    with pytest.raises(ConfigError) as caught:
        load_config("counter.toml").with_overrides(workers=0)
    assert str(caught.value) == (
        f"{tmp_path}/counter.toml: job.workers: expected an integer ≥ 1, got 0")


def test_with_overrides_keeps_the_digest_of_an_unchanged_config() -> None:
    write("counter.toml", PINNED)
    config = load_config("counter.toml")
    assert config.with_overrides().digest == config.digest


def test_dataclasses_replace_recomputes_the_digest() -> None:
    write("counter.toml", PINNED)
    config = load_config("counter.toml")
    assert dataclasses.replace(config, workers=4).digest == config.with_overrides(
        workers=4).digest


def test_parse_config_validates_a_document_without_line_numbers() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"job": {"name": "x", "task": "m:T", "inputs": ["local.a"]}}, "job.toml")
    assert str(caught.value) == (
        'job.toml: job.inputs[0]: stream "local.a" is not declared; add a '
        '[streams."local.a"] table and a [systems.local] table')


# --- errors --------------------------------------------------------------------------------


def test_malformed_toml_names_file_line_and_column() -> None:
    assert error_of("counter.toml", PINNED.replace("workers = 2", "workers = ")) == (
        "counter.toml:5: invalid TOML: Invalid value (column 11)")


def test_a_missing_job_file_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config("nowhere.toml")
    assert str(caught.value) == (
        "nowhere.toml: job file not found; pass the path of the job's .toml file")


def test_wrong_type_names_key_line_and_expected_form() -> None:
    assert error_of("counter.toml", PINNED.replace("workers = 2", 'workers = "two"')) == (
        'counter.toml:5: job.workers: expected an integer ≥ 1, got "two"')


def test_a_boolean_is_not_an_integer() -> None:
    assert error_of("counter.toml", PINNED.replace("workers = 2", "workers = true")) == (
        "counter.toml:5: job.workers: expected an integer ≥ 1, got true")


def test_an_integer_below_its_minimum_is_refused() -> None:
    assert error_of("counter.toml", PINNED.replace("commit_interval_ms = 1000",
                                                   "commit_interval_ms = 0")) == (
        "counter.toml:6: job.commit_interval_ms: expected an integer ≥ 1, got 0")


def test_the_input_idle_timeout_is_an_integer_of_milliseconds() -> None:
    write("counter.toml", PINNED.replace("workers = 2", "workers = 2\ninput_idle_timeout_ms = 0"))
    assert load_config("counter.toml").input_idle_timeout_ms == 0  # never idle
    assert error_of("counter.toml", PINNED.replace(
        "workers = 2", "workers = 2\ninput_idle_timeout_ms = -5")) == (
        "counter.toml:6: job.input_idle_timeout_ms: expected an integer ≥ 0, got -5")


def test_an_unknown_key_suggests_the_closest_known_one() -> None:
    assert error_of("counter.toml", PINNED.replace("workers = 2", "worker = 2")) == (
        'counter.toml:5: job.worker: unknown key; did you mean "workers"?')


def test_an_unknown_key_without_a_close_match_lists_the_known_keys() -> None:
    assert error_of("counter.toml", pinned_with("colour = \"blue\"\n")) == (
        "counter.toml:23: stores.totals.colour: unknown key; expected one of: changelog, "
        "key_serde, key_to_input, keyed_by, rocksdb, type, value_serde")


def test_an_unknown_table_suggests_the_closest_known_one() -> None:
    assert error_of("counter.toml", pinned_with("\n[coordinater]\nassignor = \"sticky\"\n")) == (
        "counter.toml:24: coordinater: unknown table; did you mean [coordinator]?")


def test_a_bad_enum_value_lists_the_choices() -> None:
    assert error_of("counter.toml", pinned_with('\n[coordinator]\nassignor = "stiky"\n')) == (
        'counter.toml:25: coordinator.assignor: expected one of "sticky", '
        '"high-availability", got "stiky"; did you mean "sticky"?')


def test_a_missing_required_key_points_at_its_table() -> None:
    assert error_of("counter.toml", PINNED.replace(
        'task = "counter_task:CountTask"     # module:Class, importable from the job file\'s '
        "folder\n", "")) == (
        'counter.toml:1: job.task: missing required key; add task = "module:Class" to [job]')


def test_a_missing_job_table_is_reported() -> None:
    assert error_of("counter.toml", PINNED[PINNED.index("[systems.local]"):]) == (
        "counter.toml: job: missing required table; add a [job] table with name, task and "
        "inputs")


def test_an_empty_inputs_list_is_refused() -> None:
    assert error_of("counter.toml", PINNED.replace('inputs = ["local.events"]',
                                                   "inputs = []")) == (
        'counter.toml:4: job.inputs: expected a non-empty list of "system.stream" names, '
        "got []")


def test_an_input_without_a_system_is_refused() -> None:
    assert error_of("counter.toml", PINNED.replace('inputs = ["local.events"]',
                                                   'inputs = ["events"]')) == (
        'counter.toml:4: job.inputs[0]: expected a "system.stream" name, got "events"')


def test_an_undeclared_input_stream_says_how_to_declare_it() -> None:
    assert error_of("counter.toml", PINNED.replace(
        'inputs = ["local.events"]', 'inputs = ["local.events", "local.clicks"]')) == (
        'counter.toml:4: job.inputs[1]: stream "local.clicks" is not declared; add a '
        '[streams."local.clicks"] table')


def test_a_stream_of_an_undeclared_system_says_how_to_declare_it() -> None:
    assert error_of("counter.toml", pinned_with('\n[streams."kafka.clicks"]\n')) == (
        'counter.toml:24: streams."kafka.clicks": system "kafka" is not declared; add a '
        "[systems.kafka] table (declared: local)")


def test_a_stream_listed_as_input_and_broadcast_is_refused() -> None:
    assert error_of("counter.toml", PINNED.replace(
        'inputs = ["local.events"]',
        'inputs = ["local.events"]\nbroadcast_inputs = ["local.events"]')) == (
        'counter.toml:5: job.broadcast_inputs[0]: "local.events" is also in job.inputs; a '
        "stream is either grouped into tasks or broadcast to all, not both")


def test_an_undeclared_metadata_system_is_refused() -> None:
    assert error_of("counter.toml", PINNED.replace(
        "workers = 2", 'workers = 2\nmetadata_system = "meta"')) == (
        'counter.toml:6: job.metadata_system: system "meta" is not declared; add a '
        "[systems.meta] table (declared: local)")


def test_a_job_name_must_be_usable_in_stream_names() -> None:
    assert error_of("counter.toml", PINNED.replace('name = "counter"', 'name = "my job"')) == (
        'counter.toml:2: job.name: expected a name of letters, digits, "_", "." and "-", '
        'starting with a letter or digit, got "my job"')


def test_a_task_written_with_a_dot_suggests_the_colon_form() -> None:
    assert error_of("counter.toml", PINNED.replace(
        "counter_task:CountTask", "counter_task.CountTask")) == (
        'counter.toml:3: job.task: expected "module:Class", got "counter_task.CountTask"; '
        'did you mean "counter_task:CountTask"?')


def test_a_system_without_type_is_refused() -> None:
    assert error_of("counter.toml", PINNED.replace('type = "local"\n', "")) == (
        'counter.toml:8: systems.local.type: missing required key; add type = "local" to '
        "[systems.local]")


def test_a_kafka_system_needs_bootstrap() -> None:
    assert error_of("counter.toml", pinned_with('\n[systems.kafka]\ntype = "kafka"\n')) == (
        'counter.toml:24: systems.kafka.bootstrap: missing required key; add bootstrap = '
        '"127.0.0.1:9092" to [systems.kafka]')


def test_a_kafka_bootstrap_must_be_host_port_pairs() -> None:
    assert error_of("counter.toml", pinned_with(
        '\n[systems.kafka]\ntype = "kafka"\nbootstrap = "localhost"\n')) == (
        'counter.toml:26: systems.kafka.bootstrap: expected "host:port" or '
        '"host:port,host:port", got "localhost"')


def test_a_key_of_the_other_system_type_is_unknown() -> None:
    assert error_of("counter.toml", PINNED.replace(
        'path = "data"', 'path = "data"\nbootstrap = "127.0.0.1:9092"')) == (
        "counter.toml:11: systems.local.bootstrap: unknown key for a local system; expected "
        "one of: client_options, path, retention_bytes, retention_mode, retention_ms, type")


def test_an_unknown_serde_suggests_the_closest_builtin() -> None:
    assert error_of("counter.toml", PINNED.replace('value_serde = "json"\n\n[streams."local.t',
                                                   'value_serde = "jsn"\n\n[streams."local.t')) == (
        'counter.toml:14: streams."local.events".value_serde: unknown serde "jsn"; did you '
        'mean "json"? Built-in serdes: bytes, string, json, msgpack, int64; a custom serde is '
        'named "module:Class"')


def test_a_custom_serde_that_cannot_be_imported_fails_at_load(tmp_path: Path) -> None:
    assert error_of("counter.toml", PINNED.replace(
        '[stores.totals]                      # RocksDB, logged to a changelog by default\n'
        'key_serde = "string"', '[stores.totals]\nkey_serde = "my_serdes:Upper"')) == (
        'counter.toml:21: stores.totals.key_serde: serde "my_serdes:Upper": no module named '
        f'"my_serdes" (searched {tmp_path} and sys.path); put my_serdes.py next to the job '
        "file or install the package that provides it")


def test_a_custom_serde_next_to_the_job_file_loads() -> None:
    write("job/upper_serde_mod.py", "class Upper:\n    name = 'upper'\n"
          "    def to_bytes(self, obj): return obj.upper().encode()\n"
          "    def from_bytes(self, data): return data.decode()\n")
    write("job/counter.toml", PINNED.replace('value_serde = "json"\n\n[streams."local.t',
                                             'value_serde = "upper_serde_mod:Upper"\n\n'
                                             '[streams."local.t'))
    assert load_config("job/counter.toml").stream("local.events").value_serde == (
        "upper_serde_mod:Upper")


def test_every_problem_is_reported_in_file_order() -> None:
    text = PINNED.replace("workers = 2", 'workers = "two"').replace(
        'name = "counter"', 'name = "counter"\nnmae = "x"') + '\n[errors]\npolicy = "drop"\n'
    assert error_of("counter.toml", text).splitlines() == [
        'counter.toml:3: job.nmae: unknown key; did you mean "name"?',
        'counter.toml:6: job.workers: expected an integer ≥ 1, got "two"',
        'counter.toml:26: errors.policy: expected one of "fail", "skip", "dead-letter", '
        'got "drop"',
    ]


def test_lines_are_found_past_multi_line_strings_and_arrays() -> None:
    text = PINNED.replace(
        "[systems.local]",
        '[systems.local]\nclient_options = { note = """\nworkers = 1\n[job]\n""", '
        "list = [\n  1,\n  2,\n] }")
    text = text.replace('[streams."local.events"]\nkey_serde = "string"',
                        '[streams."local.events"]\nkey_serde = 5')
    assert error_of("counter.toml", text) == (
        'counter.toml:20: streams."local.events".key_serde: expected a serde name '
        '("string", "json", "bytes", "msgpack", "int64") or "module:Class", got 5')


# --- dead letters --------------------------------------------------------------------------


DEAD_LETTER_STREAM = '\n[streams."local.dead"]\nvalue_serde = "bytes"\n'


def test_dead_letter_policy_loads_with_a_declared_stream() -> None:
    write("counter.toml", pinned_with(
        DEAD_LETTER_STREAM + '\n[errors]\npolicy = "dead-letter"\n'
        'dead_letter_stream = "local.dead"\n'))
    assert load_config("counter.toml").errors == ErrorsConfig("dead-letter", "local.dead")


def test_dead_letter_policy_requires_a_stream() -> None:
    assert error_of("counter.toml", pinned_with('\n[errors]\npolicy = "dead-letter"\n')) == (
        'counter.toml:24: errors.dead_letter_stream: missing required key when policy = '
        '"dead-letter"; add dead_letter_stream = "system.stream" to [errors]')


def test_dead_letter_stream_must_be_declared() -> None:
    assert error_of("counter.toml", pinned_with(
        '\n[errors]\npolicy = "dead-letter"\ndead_letter_stream = "local.dead"\n')) == (
        'counter.toml:26: errors.dead_letter_stream: stream "local.dead" is not declared; '
        'add a [streams."local.dead"] table')


def test_dead_letter_stream_is_refused_under_another_policy() -> None:
    assert error_of("counter.toml", pinned_with(
        DEAD_LETTER_STREAM + '\n[errors]\npolicy = "skip"\ndead_letter_stream = "local.dead"\n'
    )) == (
        'counter.toml:29: errors.dead_letter_stream: only used with policy or process_policy '
        '= "dead-letter" (policy is "skip", process_policy is "fail"); remove it or set one of '
        'them to "dead-letter"')


def test_process_policy_defaults_to_fail_and_accepts_dead_letter() -> None:
    write("counter.toml", pinned_with(""))
    assert load_config("counter.toml").errors.process_policy == "fail"
    write("counter.toml", pinned_with(
        DEAD_LETTER_STREAM + '\n[errors]\nprocess_policy = "dead-letter"\n'
        'dead_letter_stream = "local.dead"\n'))
    assert load_config("counter.toml").errors == ErrorsConfig("fail", "local.dead",
                                                              "dead-letter")


def test_process_policy_dead_letter_requires_a_stream() -> None:
    assert error_of("counter.toml", pinned_with(
        '\n[errors]\nprocess_policy = "dead-letter"\n')) == (
        'counter.toml:24: errors.dead_letter_stream: missing required key when process_policy = '
        '"dead-letter"; add dead_letter_stream = "system.stream" to [errors]')


def test_process_policy_must_be_a_known_choice() -> None:
    assert error_of("counter.toml", pinned_with('\n[errors]\nprocess_policy = "ignore"\n')) == (
        'counter.toml:25: errors.process_policy: expected one of "fail", "skip", "dead-letter", '
        'got "ignore"')


def test_dead_letter_stream_must_not_be_an_input() -> None:
    assert error_of("counter.toml", pinned_with(
        '\n[errors]\npolicy = "dead-letter"\ndead_letter_stream = "local.events"\n')) == (
        'counter.toml:26: errors.dead_letter_stream: "local.events" is an input of the job; '
        "send dead letters to a stream the job does not consume")


# --- task loading --------------------------------------------------------------------------


def test_the_task_class_is_imported_from_the_job_files_folder() -> None:
    write("job/counter_task.py", COUNT_TASK)
    write("job/counter.toml", PINNED)
    task = load_task_class(load_config("job/counter.toml"))
    assert (task.__name__, issubclass(task, StreamTask)) == ("CountTask", True)


def test_each_job_gets_its_own_module_when_two_folders_use_the_same_name() -> None:
    write("a/counter_task.py", COUNT_TASK)
    write("b/counter_task.py", COUNT_TASK.replace("class CountTask", "class CountTask2"
                                                  ).replace("\ndef not_a", "\nCountTask = "
                                                            "CountTask2\n\ndef not_a"))
    write("a/counter.toml", PINNED)
    write("b/counter.toml", PINNED)
    first = load_task_class(load_config("a/counter.toml"))
    second = load_task_class(load_config("b/counter.toml"))
    assert (first.__name__, second.__name__) == ("CountTask", "CountTask2")


def test_a_missing_task_module_names_it_and_the_fix(tmp_path: Path) -> None:
    write("counter.toml", PINNED)
    with pytest.raises(TaskLoadError) as caught:
        load_task_class(load_config("counter.toml"))
    assert str(caught.value) == (
        f'job.task = "counter_task:CountTask" in {tmp_path}/counter.toml: no module named '
        f'"counter_task" (searched {tmp_path} and sys.path); put counter_task.py next to the '
        "job file or install the package that provides it")


def test_a_missing_task_class_suggests_a_close_name(tmp_path: Path) -> None:
    write("counter_task.py", COUNT_TASK)
    write("counter.toml", PINNED.replace("counter_task:CountTask", "counter_task:CountTsk"))
    with pytest.raises(TaskLoadError) as caught:
        load_task_class(load_config("counter.toml"))
    assert str(caught.value) == (
        f'job.task = "counter_task:CountTsk" in {tmp_path}/counter.toml: module '
        f'"counter_task" ({tmp_path}/counter_task.py) has no attribute "CountTsk"; did you '
        'mean "counter_task:CountTask"?')


def test_a_task_that_is_not_a_stream_task_subclass_is_refused(tmp_path: Path) -> None:
    write("counter_task.py", COUNT_TASK)
    write("counter.toml", PINNED.replace("counter_task:CountTask", "counter_task:Plain"))
    with pytest.raises(TaskLoadError) as caught:
        load_task_class(load_config("counter.toml"))
    assert str(caught.value) == (
        f'job.task = "counter_task:Plain" in {tmp_path}/counter.toml: counter_task:Plain is '
        "a class, not a StreamTask subclass; define `class Plain(StreamTask)` with "
        "`from framework.api import StreamTask`")


def test_a_task_that_is_a_function_is_refused(tmp_path: Path) -> None:
    write("counter_task.py", COUNT_TASK)
    write("counter.toml", PINNED.replace("counter_task:CountTask", "counter_task:not_a_class"))
    with pytest.raises(TaskLoadError) as caught:
        load_task_class(load_config("counter.toml"))
    assert str(caught.value) == (
        f'job.task = "counter_task:not_a_class" in {tmp_path}/counter.toml: '
        "counter_task:not_a_class is function, not a StreamTask subclass; define "
        "`class not_a_class(StreamTask)` with `from framework.api import StreamTask`")


def test_a_task_module_with_a_missing_dependency_names_the_dependency(tmp_path: Path) -> None:
    write("counter_task.py", "import not_installed_lib\n" + COUNT_TASK)
    write("counter.toml", PINNED)
    with pytest.raises(TaskLoadError) as caught:
        load_task_class(load_config("counter.toml"))
    assert str(caught.value) == (
        f'job.task = "counter_task:CountTask" in {tmp_path}/counter.toml: importing module '
        "\"counter_task\" failed: No module named 'not_installed_lib'; install "
        '"not_installed_lib"')


# --- expansion algorithm -------------------------------------------------------------------


def test_the_default_expansion_algorithm_is_sep5s() -> None:
    write("counter.toml", PINNED)
    algorithm = load_expansion_algorithm(load_config("counter.toml"))
    assert isinstance(algorithm, DefaultPartitionExpansionAlgorithm)


def test_a_custom_expansion_algorithm_is_imported_from_the_job_folder() -> None:
    write("halving_algo.py", "class Halving:\n    def partition_before_expansion(self, p, c, i):"
                             "\n        return p // (c // i)\n")
    write("counter.toml", PINNED.replace(
        "workers = 2", 'workers = 2\nexpansion_algorithm = "halving_algo:Halving"'))
    algorithm = load_expansion_algorithm(load_config("counter.toml"))
    assert algorithm.partition_before_expansion(5, 8, 2) == 1


def test_an_expansion_algorithm_without_the_method_is_refused_at_load() -> None:
    write("bad_algo.py", "class Nothing:\n    pass\n")
    assert error_of("counter.toml", PINNED.replace(
        "workers = 2", 'workers = 2\nexpansion_algorithm = "bad_algo:Nothing"')) == (
        "counter.toml:6: job.expansion_algorithm: bad_algo:Nothing does not implement "
        "partition_before_expansion(partition, current_count, initial_count) -> int")


# --- start_position ----------------------------------------------------------------------


def test_an_input_starts_at_its_oldest_record_unless_its_start_position_says_otherwise(
) -> None:
    events = '[streams."local.events"]\n'
    starts = {}
    for spelled in ('"oldest"', '"latest"', '"2026-05-01T14:00:00+02:00"',
                    "2026-05-01T12:00:00Z", "1777636800000"):
        write("counter.toml", PINNED.replace(events, f"{events}start_position = {spelled}\n"))
        starts[spelled] = load_config("counter.toml").stream("local.events").start
    write("counter.toml", PINNED)
    assert load_config("counter.toml").stream("local.events").start == StartPosition("oldest")
    assert starts == {
        '"oldest"': StartPosition("oldest"),
        '"latest"': StartPosition("latest"),
        '"2026-05-01T14:00:00+02:00"': StartPosition("time", 1777636800000),
        "2026-05-01T12:00:00Z": StartPosition("time", 1777636800000),  # a TOML date-time
        "1777636800000": StartPosition("time", 1777636800000),
    }


def test_a_start_position_round_trips_through_to_dict_and_an_unset_one_keeps_the_digest(
) -> None:
    events = '[streams."local.events"]\n'
    write("counter.toml", PINNED)
    plain = load_config("counter.toml")
    write("counter.toml", PINNED.replace(events, f"{events}start_position = "
                                                 "2026-05-01T12:00:00Z\n"))
    timed = load_config("counter.toml")
    assert timed.to_dict()["streams"]["local.events"]["start_position"] == (
        "2026-05-01T12:00:00+00:00")
    assert parse_config(timed.to_dict(), "counter.toml").digest == timed.digest
    assert "start_position" not in plain.to_dict()["streams"]["local.events"]
    assert timed.digest != plain.digest


def test_a_start_time_without_a_zone_is_refused_naming_the_fix() -> None:
    events = '[streams."local.events"]\n'
    assert error_of("counter.toml", PINNED.replace(
        events, f'{events}start_position = "2026-05-01T12:00:00"\n')) == (
        'counter.toml:13: streams."local.events".start_position: the time '
        "2026-05-01T12:00:00 has no zone, so it names a different moment on every machine; "
        'add one: "2026-05-01T12:00:00Z" (UTC) or "…+02:00"')


def test_a_start_position_named_as_kafka_does_suggests_sampans_name() -> None:
    events = '[streams."local.events"]\n'
    assert error_of("counter.toml", PINNED.replace(
        events, f'{events}start_position = "earliest"\n')) == (
        'counter.toml:13: streams."local.events".start_position: expected "oldest", '
        '"latest", a time with its zone ("2026-05-01T12:00:00Z") or ms since the epoch '
        '(an integer ≥ 0), got "earliest" (sampan calls it "oldest")')


def test_a_start_position_of_zero_ms_is_that_time_not_the_default() -> None:
    events = '[streams."local.events"]\n'
    write("counter.toml", PINNED.replace(events, f"{events}start_position = 0\n"))
    assert load_config("counter.toml").stream("local.events").start == StartPosition("time", 0)
