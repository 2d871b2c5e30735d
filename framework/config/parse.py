"""Validate a parsed job document and build its `JobConfig`, reporting every problem.

Each table is read by a `Section` (types, ranges, unknown keys); then references
between tables are checked (inputs → streams → systems, the dead-letter stream, the
metadata system). Custom serdes and expansion algorithms are imported here, so a typo
fails at load with its line rather than in a worker later. The task class is not: it
is imported by `framework.usercode.load_task_class` where it runs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from framework.config.model import (
    ERROR_POLICIES,
    EXPANSIONS,
    GROUPERS,
    GUARANTEES,
    CoordinatorConfig,
    ErrorsConfig,
    Guarantee,
    JobConfig,
    MetricsConfig,
    RocksDBConfig,
    StartPosition,
    StoreConfig,
    StreamConfig,
    StreamRef,
    SystemConfig,
)
from framework.config.schema import Problems, Section, closest, show
from framework.config.source import KeyLines, format_path
from framework.errors import ConfigError
from framework.importing import SPEC_PATTERN, make_expansion_algorithm
from framework.serdes import get_serde

__all__ = ["build_config", "report"]

TABLES = ("job", "errors", "coordinator", "metrics", "systems", "streams", "stores")
SYSTEM_TYPES = ("local", "kafka")
JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
SYSTEM_NAME = re.compile(r"[A-Za-z0-9_-]+")
STREAM_NAME = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9._-]+")
_HOST_PORT = r"(?:\[[0-9A-Fa-f:.]+\]|[^\s,:\[\]]+):\d{1,5}"
BOOTSTRAP = re.compile(rf"{_HOST_PORT}(?:\s*,\s*{_HOST_PORT})*")

_NAME_FORM = 'a name of letters, digits, "_", "." and "-", starting with a letter or digit'
_STREAM_FORM = 'a "system.stream" name'
_SERDE_FORM = 'a serde name ("string", "json", "bytes", "msgpack", "int64") or "module:Class"'


def build_config(
    document: Mapping[str, Any], path: Path, *, shown: str, lines: KeyLines | None
) -> JobConfig:
    """The `JobConfig` of ``document`` (the job file ``path``, called ``shown`` in
    messages); one `ConfigError` listing every problem, one per line, otherwise."""
    problems = Problems()
    root = path.parent
    tables = _tables(document, problems)
    systems = _systems(tables.get("systems", {}), root, problems)
    streams = _streams(tables.get("streams", {}), systems, root, problems)
    stores = _stores(tables.get("stores", {}), root, problems)
    job = _job(tables.get("job"), systems, streams, root, problems)
    consumed = (*job.get("inputs", ()), *job.get("broadcast_inputs", ()))
    errors = _errors(tables.get("errors", {}), streams, consumed, problems)
    coordinator = _coordinator(tables.get("coordinator", {}), problems)
    metrics = _metrics(tables.get("metrics", {}), job.get("workers", 1), problems)
    if problems:
        raise ConfigError(report(problems, shown, lines))
    return JobConfig(path=path, errors=errors, coordinator=coordinator, metrics=metrics,
                     systems=systems, streams=streams, stores=stores, **job)


def report(problems: Problems, shown: str, lines: KeyLines | None) -> str:
    """``file:line: key.path: message`` per problem, in file order."""
    rows = []
    for order, (path, message) in enumerate(problems):
        line = lines.line_of(path) if lines is not None else None
        where = f"{shown}:{line}" if line is not None else shown
        indices = tuple(p for p in path if isinstance(p, int))
        rows.append((line or 0, indices, order, f"{where}: {format_path(path)}: {message}"))
    return "\n".join(row[-1] for row in sorted(rows))


def _resolve(root: Path, value: str) -> Path:
    return Path(os.path.normpath(root / Path(value).expanduser()))


def _tables(document: Mapping[str, Any], problems: Problems) -> dict[str, dict[str, Any]]:
    """The known top-level tables; anything else is reported."""
    tables: dict[str, dict[str, Any]] = {}
    for key, value in document.items():
        if key in TABLES:
            if isinstance(value, dict):
                tables[key] = value
            else:
                problems.add((key,), f"expected a table [{key}], got {show(value)}")
        elif isinstance(value, dict):
            match = closest(key, TABLES)
            hint = f"; did you mean [{match}]?" if match else (
                f"; expected one of: {', '.join(f'[{t}]' for t in TABLES)}")
            problems.add((key,), f"unknown table{hint}")
        else:
            problems.add((key,), "unknown key outside any table; keys belong in a table "
                                 "such as [job]")
    if "job" not in document:
        problems.add(("job",), "missing required table; add a [job] table with name, task "
                               "and inputs")
    return tables


def _entries(table: dict[str, Any], kind: str, problems: Problems) -> dict[str, dict[str, Any]]:
    """The sub-tables of [systems], [streams] or [stores]; non-tables are reported."""
    entries = {}
    for name, value in table.items():
        if isinstance(value, dict):
            entries[name] = value
        else:
            problems.add((kind, name), f"expected a table [{kind}.{name}], got {show(value)}")
    return entries


def _serde(section: Section, key: str, root: Path) -> str:
    """A serde spec; built-in names and importable custom serdes only."""
    spec = section.string(key, "string" if key == "key_serde" else "json", form=_SERDE_FORM)
    assert spec is not None
    if section.present(key) and isinstance(section.table[key], str):
        try:
            get_serde(spec, search_path=root)
        except ConfigError as error:
            section.problems.add((*section.path, key), str(error))
    return spec


def _systems(
    table: dict[str, Any], root: Path, problems: Problems
) -> dict[str, SystemConfig]:
    systems = {}
    for name, entry in _entries(table, "systems", problems).items():
        section = Section(entry, ("systems", name), problems)
        if not SYSTEM_NAME.fullmatch(name):
            problems.add(("systems", name), 'a system name holds letters, digits, "_" and '
                                            '"-" only (a dot separates system and stream)')
        if not section.present("type"):
            section.missing("type", '"local"')
        kind = section.choice("type", "local", SYSTEM_TYPES)
        known_type = entry.get("type") in SYSTEM_TYPES
        path = bootstrap = None
        if kind == "local":
            path = _resolve(root, section.string("path", "data") or "data")
        else:
            bootstrap = section.string("bootstrap", required='"127.0.0.1:9092"',
                                       pattern=BOOTSTRAP,
                                       form='"host:port" or "host:port,host:port"')
        options = section.table_of("client_options")
        retention = _retention(section, None) if kind == "local" else _NO_RETENTION
        if known_type:
            section.finish(f" for a {kind} system")
        systems[name] = SystemConfig(name, kind, path, bootstrap, options, *retention)
    return systems


def _undeclared_system(system: str, systems: Mapping[str, SystemConfig]) -> str:
    declared = ", ".join(sorted(systems)) or "none"
    return (f'system "{system}" is not declared; add a [systems.{system}] table '
            f"(declared: {declared})")


def _streams(
    table: dict[str, Any], systems: Mapping[str, SystemConfig], root: Path, problems: Problems
) -> dict[str, StreamConfig]:
    streams = {}
    for qualified, entry in _entries(table, "streams", problems).items():
        section = Section(entry, ("streams", qualified), problems)
        system, name = StreamRef.parse(qualified)
        if not STREAM_NAME.fullmatch(qualified):
            problems.add(("streams", qualified),
                         f'expected {_STREAM_FORM} of letters, digits, "_", "-" and ".", '
                         f'e.g. [streams."local.events"], got {show(qualified)}')
        elif system not in systems:
            problems.add(("streams", qualified), _undeclared_system(system, systems))
        key_serde = _serde(section, "key_serde", root)
        value_serde = _serde(section, "value_serde", root)
        partitions = section.optional_integer("partitions", minimum=1)
        compacted = section.boolean("compacted", False)
        retention = _retention(section, None)
        start = _start_position(section)
        if any(value is not None for value in retention):
            where = systems.get(system)
            if compacted:
                problems.add(("streams", qualified), "a compacted stream keeps the latest "
                             "record per key and is never trimmed by retention; remove "
                             "retention_ms / retention_bytes / retention_mode or compacted")
            elif where is not None and where.type != "local":
                problems.add(("streams", qualified), "retention of a Kafka topic is the "
                             "broker's (set retention.ms / retention.bytes on the topic); "
                             "remove retention_ms / retention_bytes / retention_mode")
        section.finish()
        streams[qualified] = StreamConfig(system, name, key_serde, value_serde, partitions,
                                          compacted, *retention, start)
    return streams


def _stores(table: dict[str, Any], root: Path, problems: Problems) -> dict[str, StoreConfig]:
    stores = {}
    for name, entry in _entries(table, "stores", problems).items():
        section = Section(entry, ("stores", name), problems)
        if not JOB_NAME.fullmatch(name):
            problems.add(("stores", name), f"expected {_NAME_FORM}, got {show(name)}")
        kind = section.choice("type", "rocksdb", ("rocksdb", "memory"))
        key_serde = _serde(section, "key_serde", root)
        value_serde = _serde(section, "value_serde", root)
        changelog = section.boolean("changelog", True)
        rocksdb = _rocksdb(section.table_of("rocksdb"), ("stores", name, "rocksdb"), problems)
        if kind != "rocksdb" and section.values.get("rocksdb"):
            problems.add(("stores", name, "rocksdb"), 'only a store of type = "rocksdb" has '
                         'RocksDB options; remove the table or set type = "rocksdb"')
        section.finish()
        stores[name] = StoreConfig(name, kind, key_serde, value_serde, changelog,
                                   rocksdb if kind == "rocksdb" else None)
    return stores


_NO_RETENTION: tuple[int | None, int | None, str | None] = (None, None, None)
_RETENTION_MODES = ("wait-for-readers", "drop-unread")


def _retention(section: Section, default_mode: str | None
               ) -> tuple[int | None, int | None, str | None]:
    """``retention_ms``, ``retention_bytes`` and ``retention_mode`` of a local system or
    stream table (None: not set here)."""
    retention_ms = section.optional_integer("retention_ms", minimum=1)
    retention_bytes = section.optional_integer("retention_bytes", minimum=1)
    mode: str | None = section.choice("retention_mode", _RETENTION_MODES[0],
                                      _RETENTION_MODES)
    if not section.present("retention_mode"):
        mode = default_mode
    return retention_ms, retention_bytes, mode


def _start_position(section: Section) -> str | int | None:
    """``start_position`` of a stream table as the job file spells it (a TOML date-time
    as its ISO-8601 string); None when unset or wrong (the problem is recorded)."""
    value = section.raw("start_position")
    if value is None:
        return None
    try:
        StartPosition.parse(value)
    except ValueError as error:
        section.problems.add((*section.path, "start_position"), str(error))
        section.values["start_position"] = None
        return None
    spelled: str | int = value.isoformat() if isinstance(value, datetime) else value
    section.values["start_position"] = spelled
    return spelled


def _rocksdb(table: dict[str, Any], path: tuple[str, ...], problems: Problems) -> RocksDBConfig:
    """``[stores.<name>.rocksdb]``: the RocksDB tuning keys, each checked."""
    section = Section(table, path, problems)
    defaults = RocksDBConfig()
    config = RocksDBConfig(
        block_cache_mb=section.integer("block_cache_mb", defaults.block_cache_mb, minimum=1),
        write_buffer_mb=section.integer("write_buffer_mb", defaults.write_buffer_mb,
                                        minimum=1),
        max_write_buffers=section.integer("max_write_buffers", defaults.max_write_buffers,
                                          minimum=2),
        compression=section.choice("compression", defaults.compression,
                                   ("lz4", "zstd", "snappy", "none")),
        bloom_bits_per_key=section.integer("bloom_bits_per_key", defaults.bloom_bits_per_key,
                                           minimum=0),
    )
    section.finish()
    return config


def _task_fix(value: str) -> str | None:
    """``"pkg.mod.Class"`` → ``"pkg.mod:Class"``: the usual slip."""
    module, dot, name = value.rpartition(".")
    fixed = f"{module}:{name}"
    return fixed if dot and ":" not in value and SPEC_PATTERN.fullmatch(fixed) else None


def _stream_refs(
    section: Section, key: str, names: list[str], streams: Mapping[str, StreamConfig],
    systems: Mapping[str, SystemConfig],
) -> None:
    """Each listed stream must be declared (its own table checks its system)."""
    raw = section.table.get(key)
    for name in names:
        if name in streams:
            continue
        path = (*section.path, key, raw.index(name)) if isinstance(raw, list) else (
            *section.path, key)
        system = StreamRef.parse(name).system
        also = "" if system in systems else f" and a [systems.{system}] table"
        section.problems.add(
            path, f'stream "{name}" is not declared; add a [streams."{name}"] table{also}')


def _job(
    table: dict[str, Any] | None,
    systems: Mapping[str, SystemConfig],
    streams: Mapping[str, StreamConfig],
    root: Path,
    problems: Problems,
) -> dict[str, Any]:
    """Keyword arguments of `JobConfig` from [job]."""
    if table is None:
        return {}
    s = Section(table, ("job",), problems)
    job: dict[str, Any] = {
        "name": s.string("name", required='"my-job"', pattern=JOB_NAME, form=_NAME_FORM),
        "task": s.string("task", required='"module:Class"', pattern=SPEC_PATTERN,
                         form='"module:Class"', suggest=_task_fix),
    }
    inputs = s.string_list("inputs", pattern=STREAM_NAME, item=_STREAM_FORM,
                           items='"system.stream" names', required='["local.events"]')
    broadcast = s.string_list("broadcast_inputs", pattern=STREAM_NAME, item=_STREAM_FORM,
                              items='"system.stream" names')
    _stream_refs(s, "inputs", inputs, streams, systems)
    _stream_refs(s, "broadcast_inputs", broadcast, streams, systems)
    raw_broadcast = table.get("broadcast_inputs")
    for name in broadcast:
        if name in inputs and isinstance(raw_broadcast, list):
            problems.add(("job", "broadcast_inputs", raw_broadcast.index(name)),
                         f'"{name}" is also in job.inputs; a stream is either grouped into '
                         "tasks or broadcast to all, not both")
    job.update(
        inputs=tuple(inputs),
        broadcast_inputs=tuple(broadcast),
        workers=s.integer("workers", 1, minimum=1),
        commit_interval_ms=s.integer("commit_interval_ms", 1000, minimum=1),
        window_interval_ms=s.integer("window_interval_ms", 1000, minimum=1),
        input_idle_timeout_ms=s.integer("input_idle_timeout_ms", 30000, minimum=0),
        grouper=s.choice("grouper", "partition", GROUPERS),
        expansion=s.choice("expansion", "fixed-tasks", EXPANSIONS),
        expansion_algorithm_spec=_expansion_algorithm(s, root),
        data_dir=_resolve(root, s.string("data_dir", "state") or "state"),
        metadata_system=_metadata_system(s, inputs, systems),
        write_buffer_max_keys=s.integer("write_buffer_max_keys", 100000, minimum=1),
        fetch_max_records=s.integer("fetch_max_records", 1000, minimum=1),
        store_restore_batch=s.integer("store_restore_batch", 10000, minimum=1),
        task_timeout_ms=s.integer("task_timeout_ms", 60000, minimum=0),
        standby_replicas=s.integer("standby_replicas", 0, minimum=0),
        store_memory_mb=s.integer("store_memory_mb", 256, minimum=0),
    )
    job["guarantee"] = _guarantee(s, job["metadata_system"], systems)
    s.finish()
    return job


def _guarantee(s: Section, metadata_system: str,
               systems: Mapping[str, SystemConfig]) -> Guarantee:
    """Default: exactly-once on the local log (atomic commits), at-least-once on Kafka."""
    meta = systems.get(metadata_system)
    default: Guarantee = ("at-least-once" if meta is not None and meta.type == "kafka"
                          else "exactly-once")
    return s.choice("guarantee", default, GUARANTEES)


def _expansion_algorithm(s: Section, root: Path) -> str:
    spec = s.string("expansion_algorithm", "default", form='"default" or "module:Class"',
                    pattern=re.compile(f"default|{SPEC_PATTERN.pattern}"))
    assert spec is not None
    if spec != "default":
        try:
            make_expansion_algorithm(spec, root)
        except ConfigError as error:
            s.problems.add(("job", "expansion_algorithm"), str(error))
    return spec


def _metadata_system(
    s: Section, inputs: list[str], systems: Mapping[str, SystemConfig]
) -> str:
    default = StreamRef.parse(inputs[0]).system if inputs else ""
    name = s.string("metadata_system", default, form="a system name") or default
    if s.present("metadata_system") and isinstance(s.table["metadata_system"], str) and (
            name not in systems):
        s.problems.add(("job", "metadata_system"), _undeclared_system(name, systems))
    return name


def _errors(
    table: dict[str, Any], streams: Mapping[str, StreamConfig], consumed: tuple[str, ...],
    problems: Problems,
) -> ErrorsConfig:
    s = Section(table, ("errors",), problems)
    policy = s.choice("policy", "fail", ERROR_POLICIES)
    process_policy = s.choice("process_policy", "fail", ERROR_POLICIES)
    stream = s.string("dead_letter_stream", pattern=STREAM_NAME, form=_STREAM_FORM)
    s.finish()
    path = ("errors", "dead_letter_stream")
    dead_letters = "dead-letter" in (policy, process_policy)
    if dead_letters and stream is None and not s.present("dead_letter_stream"):
        which = "policy" if policy == "dead-letter" else "process_policy"
        problems.add(path, f'missing required key when {which} = "dead-letter"; add '
                           'dead_letter_stream = "system.stream" to [errors]')
    elif not dead_letters and s.present("dead_letter_stream"):
        problems.add(path, f'only used with policy or process_policy = "dead-letter" (policy '
                           f'is "{policy}", process_policy is "{process_policy}"); remove it '
                           'or set one of them to "dead-letter"')
    elif stream is not None and stream not in streams:
        problems.add(path, f'stream "{stream}" is not declared; add a [streams."{stream}"] '
                           "table")
    elif stream is not None and stream in consumed:
        problems.add(path, f'"{stream}" is an input of the job; send dead letters to a '
                           "stream the job does not consume")
    return ErrorsConfig(policy, stream, process_policy)


def _coordinator(table: dict[str, Any], problems: Problems) -> CoordinatorConfig:
    s = Section(table, ("coordinator",), problems)
    config = CoordinatorConfig(
        monitor_interval_ms=s.integer("monitor_interval_ms", 2000, minimum=1),
        worker_stop_timeout_ms=s.integer("worker_stop_timeout_ms", 10000, minimum=0),
        worker_restart_backoff_ms=s.integer("worker_restart_backoff_ms", 500, minimum=0),
        max_worker_restarts=s.integer("max_worker_restarts", 5, minimum=0),
        crash_window_ms=s.integer("crash_window_ms", 600000, minimum=1),
        max_unreachable_ms=s.integer("max_unreachable_ms", 600000, minimum=0),
        assignor=s.choice("assignor", "sticky", ("sticky", "high-availability")),
        model_changes=s.choice("model_changes", "in-place", ("in-place", "restart")),
        rebalances=s.choice("rebalances", "incremental", ("incremental", "eager")),
        lease_timeout_ms=s.integer("lease_timeout_ms", 10000, minimum=1000),
        compaction_interval_ms=s.integer("compaction_interval_ms", 60000, minimum=0),
        retention_interval_ms=s.integer("retention_interval_ms", 60000, minimum=0),
        session_timeout_ms=s.integer("session_timeout_ms", 10000, minimum=1000),
        acceptable_recovery_lag=s.integer("acceptable_recovery_lag", 10000, minimum=0),
        max_warmup_replicas=s.integer("max_warmup_replicas", 2, minimum=0),
        probing_rebalance_interval_ms=s.integer("probing_rebalance_interval_ms", 60000,
                                                minimum=1000),
        max_rebalance_wait_ms=s.integer("max_rebalance_wait_ms", 0, minimum=0),
    )
    s.finish()
    return config



def _metrics(table: dict[str, Any], workers: int, problems: Problems) -> MetricsConfig:
    """[metrics]: a bind address that is an IP, a port whose worker ports all fit."""
    s = Section(table, ("metrics",), problems)
    enabled = s.boolean("enabled", True)
    bind = s.ip_address("bind", "127.0.0.1")
    port = s.port("port", 0)
    if port and port + workers > 65535:
        problems.add(("metrics", "port"), f"workers use ports {port + 1}..{port + workers}, past "
                     f"65535; choose a port ≤ {65535 - workers}, or 0 for free ports")
    lag_interval_ms = s.integer("lag_interval_ms", 1000, minimum=10)
    s.finish()
    return MetricsConfig(enabled, bind, port, lag_interval_ms)
