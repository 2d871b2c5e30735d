"""The ``pipeline`` key: a job file naming a pipeline instead of a task is expanded into an
ordinary job document before it is validated.

The pipeline (`framework.pipelines.Pipeline`, found by ``job.pipeline = "module:build"``)
compiles against what the file declares (`JobFacts`) and answers with the tables its job
needs (`JobTables`): its inputs — sources and the intermediate streams it re-keys through
— those intermediate streams and the stores of its aggregations, windows, joins and
tables. `expand_document` merges them into the document under what the file says itself
(a table the file declares keeps its keys; the compiled ones only fill the gaps) and sets
``job.task`` to the compiled task class. The result validates like any task job, so the
coordinator, workers, drills and every command see an ordinary job. Expanding a document
that already holds the expansion (`JobConfig.to_dict` of a pipeline job) changes nothing.

This module knows the pipeline only through `CompilesToJob`: the package that implements
it sits above the configuration.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from framework.config.schema import Problems, show
from framework.errors import ConfigError
from framework.importing import SPEC_PATTERN, ImportSpecError, import_spec

if TYPE_CHECKING:
    from framework.config.model import JobConfig

__all__ = [
    "PIPELINE_TASK",
    "CompilesToJob",
    "DeclaredStream",
    "JobFacts",
    "JobTables",
    "expand_document",
    "load_pipeline",
]

PIPELINE_TASK = "framework.pipelines.task:PipelineTask"
"""``job.task`` of every pipeline job: the one task class that runs a compiled pipeline."""


@dataclass(frozen=True)
class DeclaredStream:
    """What the job file says of one stream (None: the key is not set)."""

    system: str
    partitions: int | None = None
    key_serde: str | None = None
    value_serde: str | None = None
    compacted: bool = False


@dataclass(frozen=True)
class JobFacts:
    """What a pipeline compiles against: the job's name and what its file declares."""

    name: str
    """``job.name`` ("" when the file gives none: validation reports that)."""
    metadata_system: str
    """``job.metadata_system`` as written ("": the first input's system)."""
    systems: Mapping[str, str] = field(default_factory=dict)
    """System name → its type (``local``, ``kafka``)."""
    streams: Mapping[str, DeclaredStream] = field(default_factory=dict)
    """Declared streams by qualified name."""
    stores: frozenset[str] = frozenset()
    """Names of the declared stores."""

    @classmethod
    def of_document(cls, document: Mapping[str, Any]) -> JobFacts:
        """The facts of a parsed job file; values of the wrong type count as unset (the
        validation that follows reports them)."""
        job = _table(document.get("job"))
        streams = {}
        for qualified, table in _table(document.get("streams")).items():
            if isinstance(qualified, str) and isinstance(table, dict):
                partitions = table.get("partitions")
                streams[qualified] = DeclaredStream(
                    system=qualified.partition(".")[0],
                    partitions=partitions if _count(partitions) else None,
                    key_serde=_text(table.get("key_serde")),
                    value_serde=_text(table.get("value_serde")),
                    compacted=table.get("compacted") is True)
        systems = {name: str(table.get("type", "")) for name, table
                   in _table(document.get("systems")).items() if isinstance(table, dict)}
        return cls(name=_text(job.get("name")) or "",
                   metadata_system=_text(job.get("metadata_system")) or "",
                   systems=systems, streams=streams,
                   stores=frozenset(k for k in _table(document.get("stores"))
                                    if isinstance(k, str)))

    @classmethod
    def of_config(cls, config: JobConfig) -> JobFacts:
        """The facts of a validated job (what a worker compiles its pipeline against)."""
        return cls(
            name=config.name, metadata_system=config.metadata_system,
            systems={name: s.type for name, s in config.systems.items()},
            streams={q: DeclaredStream(s.system, s.partitions, s.key_serde, s.value_serde,
                                       s.compacted) for q, s in config.streams.items()},
            stores=frozenset(config.stores))


@dataclass(frozen=True)
class JobTables:
    """What a compiled pipeline adds to its job file."""

    sources: tuple[str, ...]
    """The streams the pipeline reads that it does not write (``job.inputs`` may list
    just these)."""
    inputs: tuple[str, ...]
    """``job.inputs``: the sources, then the intermediate streams."""
    broadcast_inputs: tuple[str, ...] = ()
    """``job.broadcast_inputs``: tables every task reads in full."""
    intermediate: tuple[str, ...] = ()
    """The streams the pipeline re-keys through (it writes and reads them)."""
    streams: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Tables of ``[streams]`` to add (keys of an existing table win)."""
    stores: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Tables of ``[stores]`` to add (keys of an existing table win)."""
    client_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """System → ``client_options`` to add to its declared table (the file's win)."""


@runtime_checkable
class CompilesToJob(Protocol):
    """A pipeline, as the configuration sees it."""

    def job_tables(self, facts: JobFacts) -> JobTables:
        """Compile against ``facts``; `ConfigError` (one line, naming the operator and
        the fix) when the pipeline cannot run as declared."""
        ...


def load_pipeline(spec: str, root: Path) -> CompilesToJob:
    """The pipeline ``spec`` (``"module:build"``) names: a function returning one, or the
    object itself; `ConfigError` saying what is wrong otherwise."""
    try:
        target = import_spec(spec, root)
    except ImportSpecError as error:
        raise ConfigError(str(error)) from None
    if not isinstance(target, CompilesToJob):
        if not callable(target):
            raise ConfigError(f"{spec} is {type(target).__name__}, not a function returning "
                              "a framework.pipelines.Pipeline")
        try:
            target = target()
        except ConfigError:
            raise
        except Exception as error:
            raise ConfigError(f"{spec}() raised {type(error).__name__}: {error}") from error
    if not isinstance(target, CompilesToJob):
        raise ConfigError(f"{spec}() returned {type(target).__name__}, not a "
                          "framework.pipelines.Pipeline; return the Pipeline it builds")
    return target


def expand_document(document: Mapping[str, Any], root: Path,
                    problems: Problems) -> tuple[Mapping[str, Any], tuple[str, ...]]:
    """``document`` with its pipeline's job tables merged in, and the pipeline's
    intermediate streams; ``document`` itself (and no streams) when it names no pipeline
    or the pipeline cannot be compiled (then a problem says why)."""
    job = document.get("job")
    if not isinstance(job, dict) or "pipeline" not in job:
        return document, ()
    spec = job["pipeline"]
    if not isinstance(spec, str) or not SPEC_PATTERN.fullmatch(spec):
        return document, ()  # the key's own validation says what is wrong
    where = ("job", "pipeline")
    task = job.get("task")
    if task is not None and task != PIPELINE_TASK:
        problems.add(("job", "task"), "a pipeline job runs its compiled pipeline, not a task "
                     "of its own: remove task (or pipeline, to run the task)")
    try:
        tables = load_pipeline(spec, root).job_tables(JobFacts.of_document(document))
    except ConfigError as error:
        problems.add(where, str(error))
        return document, ()
    expanded = copy.deepcopy(dict(document))
    job = expanded["job"]
    job["task"] = PIPELINE_TASK
    for key, derived in (("inputs", tables.inputs),
                         ("broadcast_inputs", tables.broadcast_inputs)):
        given = job.get(key)
        accepted = ([list(derived)] if key == "broadcast_inputs"
                    else [list(tables.sources), list(derived)])
        if given is not None and (not isinstance(given, list)
                                  or sorted(given) not in [sorted(a) for a in accepted]):
            problems.add(("job", key), f"a pipeline reads {_names(derived)}; remove {key} "
                         f"(got {show(given)})")
        job[key] = list(derived)
    for name, (section, defaults) in [*((n, ("streams", d)) for n, d in tables.streams.items()),
                                      *((n, ("stores", d)) for n, d in tables.stores.items())]:
        entries = expanded.setdefault(section, {})
        if not isinstance(entries, dict):
            return document, tables.intermediate  # reported by the table check
        entry = entries.setdefault(name, {})
        if isinstance(entry, dict):
            for key, value in defaults.items():
                entry.setdefault(key, value)
    for system, options in tables.client_options.items():
        table = _table(_table(expanded.get("systems")).get(system))
        if isinstance(table.setdefault("client_options", {}), dict):
            for key, value in options.items():
                table["client_options"].setdefault(key, value)
    for name in tables.intermediate:
        entry = expanded["streams"][name]
        if isinstance(entry, dict) and entry.get("compacted") is True:
            problems.add(("streams", name, "compacted"), f"{name} is an intermediate stream "
                         "of the pipeline, read like any input: it keeps every record; "
                         "remove compacted")
    return expanded, tables.intermediate


def _table(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _names(streams: tuple[str, ...]) -> str:
    return ", ".join(streams) or "nothing"
