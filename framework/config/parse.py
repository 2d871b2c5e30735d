"""Validate a parsed job document and build its `JobConfig`, reporting every problem.

Each table is read by the declarations of its dataclass (`framework.config.declare`:
types, ranges, choices, named parsers, unknown keys); then what spans keys or tables
is checked here (a stream's retention against its system, the dead-letter stream
against the policies, the metrics ports against the workers). Custom serdes and
expansion algorithms are imported while reading, so a typo fails at load with its line
rather than in a worker later. The task class is not: it is imported by
`framework.api.load_task_class` where it runs. A job naming a ``pipeline`` is first
expanded into the tables its compiled pipeline needs (`framework.config.pipeline`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from framework.config.declare import Reading, read_table
from framework.config.kinds import (
    JOB_NAME,
    NAME_FORM,
    STREAM_FORM,
    STREAM_NAME,
    SYSTEM_NAME,
    undeclared_system,
)
from framework.config.model import (
    TABLES,
    CoordinatorConfig,
    ErrorsConfig,
    JobConfig,
    MetricsConfig,
    QueriesConfig,
    StoreConfig,
    StreamConfig,
    StreamRef,
    SystemConfig,
)
from framework.config.pipeline import expand_document
from framework.config.schema import Problems, Section, closest, show
from framework.config.source import KeyLines, format_path
from framework.errors import ConfigError
from framework.importing import ImportSpecError, import_spec

__all__ = ["build_config", "report"]

FILE_TABLES = ("job", *TABLES)
"""The top-level tables of a job file."""


def build_config(
    document: Mapping[str, Any], path: Path, *, shown: str, lines: KeyLines | None
) -> JobConfig:
    """The `JobConfig` of ``document`` (the job file ``path``, called ``shown`` in
    messages); one `ConfigError` listing every problem, one per line, otherwise."""
    problems = Problems()
    root = path.parent
    document, intermediate = expand_document(document, root, problems)
    tables = _tables(document, problems)
    systems = _systems(tables.get("systems", {}), root, problems)
    streams = _streams(tables.get("streams", {}), systems, root, problems)
    stores = _stores(tables.get("stores", {}), root, problems)
    job = _job(tables.get("job"), systems, streams, root, problems)
    consumed = (*job.get("inputs", ()), *job.get("broadcast_inputs", ()))
    errors = _errors(tables.get("errors", {}), streams, consumed, problems)
    coordinator = CoordinatorConfig(**_read(CoordinatorConfig, tables.get("coordinator", {}),
                                            ("coordinator",), problems))
    metrics = _metrics(tables.get("metrics", {}), job.get("workers", JobConfig.workers),
                       problems)
    queries = _queries(tables.get("queries", {}), job.get("workers", JobConfig.workers),
                       root, problems)
    _keyed_stores(stores, job.get("inputs", ()), root, problems)
    if problems:
        raise ConfigError(report(_pipeline_first(problems), shown, lines))
    return JobConfig(path=path, errors=errors, coordinator=coordinator, metrics=metrics,
                     queries=queries, systems=systems, streams=streams, stores=stores,
                     intermediate_streams=intermediate, **job)


def report(problems: Problems, shown: str, lines: KeyLines | None) -> str:
    """``file:line: key.path: message`` per problem, in file order."""
    rows = []
    for order, (path, message) in enumerate(problems):
        line = lines.line_of(path) if lines is not None else None
        where = f"{shown}:{line}" if line is not None else shown
        indices = tuple(p for p in path if isinstance(p, int))
        rows.append((line or 0, indices, order, f"{where}: {format_path(path)}: {message}"))
    return "\n".join(row[-1] for row in sorted(rows))


def _pipeline_first(problems: Problems) -> Problems:
    """``problems`` without the keys a pipeline that failed to compile would have given
    (its task and inputs): only what is wrong with it is news."""
    if not any(path == ("job", "pipeline") for path, _ in problems):
        return problems
    kept = Problems()
    for path, message in problems:
        if not (path in (("job", "task"), ("job", "inputs"))
                and message.startswith("missing required key")):
            kept.add(path, message)
    return kept


def _tables(document: Mapping[str, Any], problems: Problems) -> dict[str, dict[str, Any]]:
    """The known top-level tables; anything else is reported."""
    tables: dict[str, dict[str, Any]] = {}
    for key, value in document.items():
        if key in FILE_TABLES:
            if isinstance(value, dict):
                tables[key] = value
            else:
                problems.add((key,), f"expected a table [{key}], got {show(value)}")
        elif isinstance(value, dict):
            match = closest(key, FILE_TABLES)
            hint = f"; did you mean [{match}]?" if match else (
                f"; expected one of: {', '.join(f'[{t}]' for t in FILE_TABLES)}")
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


def _read(cls: type[Any], table: Mapping[str, Any], path: tuple[str, ...],
          problems: Problems, root: Path = Path()) -> dict[str, Any]:
    """A table that only its own declarations check: its values, unknown keys reported;
    ``root``: the job file's folder, which relative paths in it are read from."""
    reading = Reading(Section(table, path, problems), root)
    values = read_table(cls, reading)
    reading.section.finish()
    return values


def _systems(
    table: dict[str, Any], root: Path, problems: Problems
) -> dict[str, SystemConfig]:
    systems = {}
    for name, entry in _entries(table, "systems", problems).items():
        reading = Reading(Section(entry, ("systems", name), problems), root)
        if not SYSTEM_NAME.fullmatch(name):
            problems.add(("systems", name), 'a system name holds letters, digits, "_" and '
                                            '"-" only (a dot separates system and stream)')
        values = read_table(SystemConfig, reading)
        kind = values["type"]
        if kind is not None:  # keys of an unknown type of system are not checked
            reading.section.finish(f" for a {kind} system")
        systems[name] = SystemConfig(name, root=root, **values)
    return systems


def _streams(
    table: dict[str, Any], systems: Mapping[str, SystemConfig], root: Path, problems: Problems
) -> dict[str, StreamConfig]:
    streams = {}
    for qualified, entry in _entries(table, "streams", problems).items():
        reading = Reading(Section(entry, ("streams", qualified), problems), root, systems)
        system, name = StreamRef.parse(qualified)
        if not STREAM_NAME.fullmatch(qualified):
            problems.add(("streams", qualified),
                         f'expected {STREAM_FORM} of letters, digits, "_", "-" and ".", '
                         f'e.g. [streams."local.events"], got {show(qualified)}')
        elif system not in systems:
            problems.add(("streams", qualified), undeclared_system(system, systems))
        values = read_table(StreamConfig, reading)
        retention = (values["retention_ms"], values["retention_bytes"],
                     values["retention_mode"])
        if any(value is not None for value in retention):
            where = systems.get(system)
            if values["compacted"]:
                problems.add(("streams", qualified), "a compacted stream keeps the latest "
                             "record per key and is never trimmed by retention; remove "
                             "retention_ms / retention_bytes / retention_mode or compacted")
            elif where is not None and where.type == "kafka":
                problems.add(("streams", qualified), "retention of a Kafka topic is the "
                             "broker's (set retention.ms / retention.bytes on the topic); "
                             "remove retention_ms / retention_bytes / retention_mode")
        reading.section.finish()
        streams[qualified] = StreamConfig(system, name, **values)
    return streams


def _stores(table: dict[str, Any], root: Path, problems: Problems) -> dict[str, StoreConfig]:
    stores = {}
    for name, entry in _entries(table, "stores", problems).items():
        reading = Reading(Section(entry, ("stores", name), problems), root)
        if not JOB_NAME.fullmatch(name):
            problems.add(("stores", name), f"expected {NAME_FORM}, got {show(name)}")
        values = read_table(StoreConfig, reading)
        if values["type"] != "rocksdb":
            if reading.section.values.get("rocksdb"):
                problems.add(("stores", name, "rocksdb"), 'only a store of type = "rocksdb" '
                             'has RocksDB options; remove the table or set type = "rocksdb"')
            values["rocksdb"] = None
        reading.section.finish()
        stores[name] = StoreConfig(name, **values)
    return stores


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
    reading = Reading(Section(table, ("job",), problems), root, systems, streams)
    job = read_table(JobConfig, reading)
    raw_broadcast = table.get("broadcast_inputs")
    for name in job["broadcast_inputs"]:
        if name in job["inputs"] and isinstance(raw_broadcast, list):
            problems.add(("job", "broadcast_inputs", raw_broadcast.index(name)),
                         f'"{name}" is also in job.inputs; a stream is either grouped into '
                         "tasks or broadcast to all, not both")
    reading.section.finish()
    return job


def _errors(
    table: dict[str, Any], streams: Mapping[str, StreamConfig], consumed: tuple[str, ...],
    problems: Problems,
) -> ErrorsConfig:
    config = ErrorsConfig(**_read(ErrorsConfig, table, ("errors",), problems))
    policy, process_policy, stream = (config.policy, config.process_policy,
                                      config.dead_letter_stream)
    present = "dead_letter_stream" in table
    path = ("errors", "dead_letter_stream")
    dead_letters = "dead-letter" in (policy, process_policy)
    if dead_letters and stream is None and not present:
        which = "policy" if policy == "dead-letter" else "process_policy"
        problems.add(path, f'missing required key when {which} = "dead-letter"; add '
                           'dead_letter_stream = "system.stream" to [errors]')
    elif not dead_letters and present:
        problems.add(path, f'only used with policy or process_policy = "dead-letter" (policy '
                           f'is "{policy}", process_policy is "{process_policy}"); remove it '
                           'or set one of them to "dead-letter"')
    elif stream is not None and stream not in streams:
        problems.add(path, f'stream "{stream}" is not declared; add a [streams."{stream}"] '
                           "table")
    elif stream is not None and stream in consumed:
        problems.add(path, f'"{stream}" is an input of the job; send dead letters to a '
                           "stream the job does not consume")
    return config


def _metrics(table: dict[str, Any], workers: int, problems: Problems) -> MetricsConfig:
    """[metrics]: a bind address that is an IP, a port whose worker ports all fit."""
    config = MetricsConfig(**_read(MetricsConfig, table, ("metrics",), problems))
    if config.port and config.port + workers > 65535:
        problems.add(("metrics", "port"), f"workers use ports {config.port + 1}.."
                     f"{config.port + workers}, past 65535; choose a port ≤ "
                     f"{65535 - workers}, or 0 for free ports")
    return config


def _queries(table: dict[str, Any], workers: int, root: Path,
             problems: Problems) -> QueriesConfig:
    """[queries]: one token source, worker ports that all fit."""
    config = QueriesConfig(**_read(QueriesConfig, table, ("queries",), problems, root))
    if config.port and config.port + workers - 1 > 65535:
        problems.add(("queries", "port"), f"workers use ports {config.port}.."
                     f"{config.port + workers - 1}, past 65535; choose a port ≤ "
                     f"{65536 - workers}, or 0 for free ports")
    if config.token is not None and config.token_file is not None:
        problems.add(("queries", "token_file"), "set either token or token_file, not both")
    return config


def _keyed_stores(stores: Mapping[str, StoreConfig], inputs: tuple[str, ...], root: Path,
                  problems: Problems) -> None:
    """A store's ``keyed_by`` names an input of the job; ``key_to_input`` needs it and
    imports (a typo fails at load, not at the first query)."""
    for name, store in stores.items():
        if store.keyed_by is not None and store.keyed_by not in inputs:
            problems.add(("stores", name, "keyed_by"),
                         f'"{store.keyed_by}" is not an input of the job; name one of '
                         f"job.inputs ({', '.join(inputs) or 'none'}): the stream whose "
                         "record keys this store's keys are")
        if store.key_to_input is None:
            continue
        if store.keyed_by is None:
            problems.add(("stores", name, "key_to_input"),
                         "only used with keyed_by; add keyed_by = \"system.stream\" (the "
                         "input whose keys the function returns) or remove it")
            continue
        try:
            function = import_spec(store.key_to_input, root)
        except ImportSpecError as error:
            problems.add(("stores", name, "key_to_input"), str(error))
            continue
        if not callable(function):
            problems.add(("stores", name, "key_to_input"),
                         f"{store.key_to_input} is a {type(function).__name__}, not a "
                         "function; name a function taking a store key and returning the "
                         "input's record key")
