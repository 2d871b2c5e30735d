"""The validated job configuration: `JobConfig` (``[job]``, whose fields declare its keys,
and the tables of `framework.config.sections`), frozen.

Build them with `framework.config.load_config`; every value here has passed validation.
`JobConfig` adds the derived names the runtime shares (changelog and coordinator
streams, the one definition of "stateful"). Loading the user code the file names is
`framework.api`'s job: these objects stay plain data.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, get_args

from framework.config.declare import NOT_A_KEY, TABLE, Reading, declared, setting
from framework.config.kinds import (
    JOB_NAME,
    NAME_FORM,
    AlgorithmSpec,
    Folder,
    Integer,
    OneOf,
    StreamNames,
    SystemName,
    Text,
)
from framework.config.schema import did_you_mean, did_you_mean_stream
from framework.config.sections import (
    ERROR_POLICIES,
    CoordinatorConfig,
    ErrorPolicy,
    ErrorsConfig,
    MetricsConfig,
    QueriesConfig,
    RocksDBConfig,
    StartPosition,
    StoreConfig,
    StreamConfig,
    StreamRef,
    SystemConfig,
)
from framework.errors import ConfigError
from framework.importing import SPEC_PATTERN
from framework.secrets import without_secrets

__all__ = [
    "ERROR_POLICIES",
    "EXPANSIONS",
    "GROUPERS",
    "GUARANTEES",
    "TABLES",
    "CoordinatorConfig",
    "ErrorPolicy",
    "ErrorsConfig",
    "Expansion",
    "Grouper",
    "Guarantee",
    "JobConfig",
    "MetricsConfig",
    "QueriesConfig",
    "RocksDBConfig",
    "StartPosition",
    "StoreConfig",
    "StreamConfig",
    "StreamRef",
    "SystemConfig",
]

Grouper = Literal["partition", "system-stream-partition", "single"]
"""``job.grouper``: how input partitions become tasks."""
GROUPERS: tuple[Grouper, ...] = get_args(Grouper)

Expansion = Literal["fixed-tasks", "regroup"]
"""``job.expansion``: what a stateful job does when its inputs gain partitions."""
EXPANSIONS: tuple[Expansion, ...] = get_args(Expansion)

Guarantee = Literal["exactly-once", "at-least-once"]
"""``job.guarantee``: how outputs, changelogs and checkpoints commit together."""
GUARANTEES: tuple[Guarantee, ...] = get_args(Guarantee)


def _task_fix(value: str) -> str | None:
    """``"pkg.mod.Class"`` → ``"pkg.mod:Class"``: the usual slip."""
    module, dot, name = value.rpartition(".")
    fixed = f"{module}:{name}"
    return fixed if dot and ":" not in value and SPEC_PATTERN.fullmatch(fixed) else None


def _first_input_system(reading: Reading) -> str:
    """``job.metadata_system`` by default: the system of the first input."""
    inputs = reading.values.get("inputs") or ()
    return StreamRef.parse(inputs[0]).system if inputs else ""


def _guarantee_of_metadata_system(reading: Reading) -> str:
    """``job.guarantee`` by default: exactly-once on the local log (its commits are atomic),
    at-least-once on Kafka (where exactly-once needs transactions)."""
    meta = reading.systems.get(reading.values.get("metadata_system", ""))
    return "at-least-once" if meta is not None and meta.type == "kafka" else "exactly-once"


_ADDED_SINCE_DIGESTS_WERE_PINNED = ("expansion_merge_ms",)
"""``[job]`` keys added after the digests of job files were pinned: at its declared default
such a key is left out of `JobConfig.digest`, so an upgrade changes no running job's digest
(workers compare them)."""


@dataclass(frozen=True)
class JobConfig:
    """A whole job file, validated. Paths are absolute, resolved against the file's folder.

    Each ``[job]`` key is declared by its field (``docs/config.md`` lists them); the other
    tables are the sections of `framework.config.sections`."""

    path: Path = field(metadata=NOT_A_KEY)
    """The job file (absolute)."""
    name: str = field(metadata=setting(
        Text(form=NAME_FORM, pattern=JOB_NAME),
        "`[A-Za-z0-9][A-Za-z0-9_.-]*`; names the job's metadata streams "
        "(`__sampan-<name>-coordinator`, `<name>-<store>-changelog`) and its checkpoints.",
        required='"my-job"'))
    task: str = field(metadata=setting(
        Text(form='"module:Class"', pattern=SPEC_PATTERN, suggest=_task_fix),
        '`"module:Class"` of a `framework.StreamTask` subclass, importable from the job '
        "file's folder. Not with `pipeline`, which sets it to the task that runs the "
        "compiled pipeline.", required='"module:Class"'))
    inputs: tuple[str, ...] = field(metadata=setting(
        StreamNames(nonempty=True),
        "Streams grouped into tasks by `grouper`. Each must be declared under `[streams]`. "
        "A pipeline job's are its sources and intermediate streams (leave it out).",
        required='["local.events"]'))
    pipeline: str | None = field(default=None, metadata=setting(
        Text(form='"module:function"', pattern=SPEC_PATTERN, suggest=_task_fix),
        '`"module:function"` returning a `framework.pipelines.Pipeline` (or naming one), '
        "importable from the job file's folder, instead of `task`: the pipeline is compiled "
        "when the file loads, into the job's task, its `inputs` (the pipeline's sources and "
        "intermediate streams) and the streams and stores it needs, each added unless the "
        "file declares it (then the file's keys win). See "
        "[pipelines.md](pipelines.md#the-job-file)."))
    intermediate_streams: tuple[str, ...] = field(default=(), metadata=NOT_A_KEY)
    """The streams a pipeline job re-keys through: inputs of the job that its own tasks
    write (derived from `pipeline`; empty for a task job)."""
    broadcast_inputs: tuple[str, ...] = field(default=(), metadata=setting(
        StreamNames(),
        "Streams every task consumes in full (e.g. a small reference table). Not also in "
        "`inputs`."))
    workers: int = field(default=1, metadata=setting(
        Integer(minimum=1), "Worker processes `sampan run` starts."))
    commit_interval_ms: int = field(default=1000, metadata=setting(
        Integer(minimum=1),
        "How often each task commits (outputs, changelog, checkpoint; see "
        "[worker.md](worker.md))."))
    window_interval_ms: int = field(default=1000, metadata=setting(
        Integer(minimum=1),
        "How often `StreamTask.window` runs (only when the task overrides it)."))
    input_idle_timeout_ms: int = field(default=30000, metadata=setting(
        Integer(minimum=0),
        "An input partition that the worker has read to its end and that has delivered "
        "nothing for this long stops holding back the event-time watermark of "
        '`framework.windows` (`EventTime(source="records")`, the default) until it delivers '
        "again; `0`: never (an idle partition holds the watermark forever). Which records "
        "this can make late: [windows.md](windows.md#idle-partitions)."))
    grouper: Grouper = field(default="partition", metadata=setting(
        OneOf(GROUPERS),
        "SSP → task grouping: one task per partition number, one per SSP, or one task for "
        "everything."))
    expansion: Expansion = field(default="fixed-tasks", metadata=setting(
        OneOf(EXPANSIONS),
        "`fixed-tasks` keeps every key on its task when an input expands (SEP-5; only "
        "effective for stateful jobs); `regroup` is the plain grouper that miscounts, for "
        "drills."))
    expansion_algorithm_spec: str = field(default="default", metadata=setting(
        AlgorithmSpec(),
        "Maps a new partition to its partition before expansion; the default is "
        "`partition % initial_count`. A custom class implements "
        "`partition_before_expansion(partition, current_count, initial_count) -> int`; it "
        "is imported at load time.", name="expansion_algorithm"))
    expansion_merge_ms: int = field(default=300000, metadata=setting(
        Integer(minimum=0),
        "For this long after a task passes an expansion barrier, it reads "
        "the stream's new partitions in record-time order with the old ones, so that "
        "records a producer still wrote to a key's old partition (one that learned of the "
        "new count late: Kafka clients re-read it every `metadata.max.age.ms`, 5 minutes "
        "by default) come before that key's records in its new partition. A worker that "
        "starts the task within this time of the expansion (a restart, a failover) reads "
        "them so too. `0`: new partitions are read as they come once the barrier is "
        "passed. See "
        "[coordinator.md](coordinator.md#per-key-order-after-a-barrier)."))
    data_dir: Path = field(default=Path("state"), metadata=setting(
        Folder(),
        "Where the job keeps its local state, in `<data_dir>/<job name>/`: stores "
        "(`stores/<store>/<task>`), worker logs (`logs/worker-N.log`) and the configuration "
        "`sampan run` started with (`run/`). Job files sharing a `data_dir` never share "
        "anything there. Relative to the job file."))
    metadata_system: str = field(default="", metadata=setting(
        SystemName(), "System holding the coordinator stream, checkpoints and changelogs.",
        derive=_first_input_system, default_doc="the first input's system"))
    write_buffer_max_keys: int = field(default=100000, metadata=setting(
        Integer(minimum=1),
        "Keys one task's store write buffer holds before it forces a commit."))
    fetch_max_records: int = field(default=1000, metadata=setting(
        Integer(minimum=1), "Records per fetch from a system."))
    store_restore_batch: int = field(default=10000, metadata=setting(
        Integer(minimum=1), "Changelog records per RocksDB write batch during a restore."))
    store_memory_mb: int = field(default=256, metadata=setting(
        Integer(minimum=0),
        "One memory bound per worker process for all its RocksDB stores, of every task: one "
        "block cache of this size shared by all of them, with their memtables (write "
        "buffers) charged to it and flushed once they pass half of it; index and filter "
        "blocks live in it too ([stores.md](stores.md#one-memory-bound-per-worker)). `0`: "
        "each store of each task has its own `block_cache_mb` cache and unmanaged write "
        "buffers (memory then grows with the number of tasks)."))
    task_timeout_ms: int = field(default=60000, metadata=setting(
        Integer(minimum=0),
        "The task watchdog: a `process` or `window` call that makes no progress this long "
        "is logged with its task, SSP and offset, and its worker restarted "
        "([coordinator.md](coordinator.md#the-task-watchdog)); `0` disables it."))
    standby_replicas: int = field(default=0, metadata=setting(
        Integer(minimum=0),
        "Several hosts over Kafka (`sampan run --host`): copies of each stateful task's "
        "stores kept current on other hosts by tailing its changelog, so a failover "
        "restores only the gap ([hosts.md](hosts.md)). Capped at the number of other hosts; "
        "ignored by a one-host run."))
    guarantee: Guarantee = field(default="exactly-once", metadata=setting(
        OneOf(GUARANTEES),
        "How commits land ([worker.md](worker.md#the-commit-protocol)). On the local log "
        "every commit is one SQLite transaction either way. On Kafka `exactly-once` makes "
        "each commit one Kafka transaction (outputs, changelog records, checkpoints) and "
        "needs a broker with transactions: on one without (tansu) the worker exits 2 naming "
        "the broker's answer and the fix. Outputs to a system other than the metadata "
        "system stay at-least-once. Part of the config digest.",
        derive=_guarantee_of_metadata_system,
        default_doc='`"exactly-once"` if the metadata system is local, `"at-least-once"` if '
                    "it is kafka"))
    errors: ErrorsConfig = field(default_factory=ErrorsConfig, metadata=TABLE)
    """``[errors]``."""
    coordinator: CoordinatorConfig = field(default_factory=CoordinatorConfig, metadata=TABLE)
    """``[coordinator]``."""
    metrics: MetricsConfig = field(default_factory=MetricsConfig, metadata=TABLE)
    """``[metrics]``."""
    queries: QueriesConfig = field(default_factory=QueriesConfig, metadata=TABLE)
    """``[queries]``."""
    systems: Mapping[str, SystemConfig] = field(default_factory=dict, metadata=TABLE)
    """``[systems.*]`` by name."""
    streams: Mapping[str, StreamConfig] = field(default_factory=dict, metadata=TABLE)
    """``[streams.*]`` by qualified name."""
    stores: Mapping[str, StoreConfig] = field(default_factory=dict, metadata=TABLE)
    """``[stores.*]`` by name."""

    @property
    def state_dir(self) -> Path:
        """This job's own folder, ``<data_dir>/<name>``: its stores, worker logs and run
        files, so several job files may share one ``data_dir``."""
        return self.data_dir / self.name

    @property
    def root(self) -> Path:
        """The job file's folder: relative paths and task modules are found there."""
        return self.path.parent

    def stream(self, qualified: str) -> StreamConfig:
        """The declared stream ``"system.stream"``; `ConfigError` saying how to declare it."""
        found = self.streams.get(qualified)
        if found is None:
            raise ConfigError(
                f'stream "{qualified}" is not declared in {self.path}; add a '
                f'[streams."{qualified}"] table (declared: {_names(self.streams)})'
                f"{did_you_mean_stream(qualified, self.streams)}"
            )
        return found

    def system(self, name: str) -> SystemConfig:
        """The declared system ``name``; `ConfigError` saying how to declare it."""
        found = self.systems.get(name)
        if found is None:
            raise ConfigError(
                f'system "{name}" is not declared in {self.path}; add a [systems.{name}] '
                f"table (declared: {_names(self.systems)}){did_you_mean(name, self.systems)}"
            )
        return found

    def store(self, name: str) -> StoreConfig:
        """The declared store ``name``; `ConfigError` saying how to declare it."""
        found = self.stores.get(name)
        if found is None:
            raise ConfigError(
                f'store "{name}" is not declared in {self.path}; add a [stores.{name}] '
                f"table (declared: {_names(self.stores)})"
            )
        return found

    @property
    def input_streams(self) -> tuple[StreamConfig, ...]:
        """Every stream the job consumes: `inputs`, then `broadcast_inputs`."""
        return tuple(self.streams[s] for s in (*self.inputs, *self.broadcast_inputs))

    @property
    def logged_stores(self) -> tuple[str, ...]:
        """Names of the stores with a changelog, sorted."""
        return tuple(sorted(name for name, s in self.stores.items() if s.changelog))

    @property
    def stateful(self) -> bool:
        """True iff the job has a logged store — the one definition of "stateful": only
        then must keys stay on their task across expansions."""
        return bool(self.logged_stores)

    def changelog_stream(self, store: str) -> str:
        """``"<metadata_system>.<job>-<store>-changelog"``, one partition per task."""
        return self.changelog_ref(store).qualified

    def changelog_ref(self, store: str) -> StreamRef:
        """Store ``store``'s changelog as a `StreamRef` (on the metadata system)."""
        self.store(store)
        return StreamRef(self.metadata_system, f"{self.name}-{store}-changelog")

    @property
    def coordinator_stream(self) -> str:
        """``"<metadata_system>.__sampan-<job>-coordinator"``, the job's memory."""
        return self.coordinator_ref.qualified

    @property
    def coordinator_ref(self) -> StreamRef:
        """The coordinator stream as a `StreamRef` (on the metadata system)."""
        return StreamRef(self.metadata_system, f"__sampan-{self.name}-coordinator")

    def to_dict(self) -> dict[str, Any]:
        """The configuration as a TOML-shaped document with every default filled in and
        paths relative to `root` where they lie inside it; `parse_config` accepts it.

        Derived from the declarations (a new key appears here by being declared)."""
        document = _document(self, self._relative)
        tables = {name: document.pop(name) for name in TABLES}
        return {"job": document, **tables}

    @cached_property
    def digest(self) -> str:
        """sha256 of the canonical JSON of `to_dict` without its secrets: equal for equal
        configurations, whatever the key order, which defaults the file spells out, and
        whether a password is written or referred to (``${VAR}``)."""
        document = without_secrets(self.to_dict())
        if self.queries == QueriesConfig():  # the digest a job had before [queries] existed:
            del document["queries"]  # its running workers are not restarted by an upgrade
        defaults = {f.name: f.default for f in fields(self)}
        for key in _ADDED_SINCE_DIGESTS_WERE_PINNED:  # likewise for keys added since
            if document["job"].get(key) == defaults[key]:
                del document["job"][key]
        canonical = json.dumps(document, sort_keys=True,
                               separators=(",", ":"),
                               ensure_ascii=False, default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()

    def with_overrides(
        self, overrides: Mapping[str, Any] | None = None, /, **job: Any
    ) -> JobConfig:
        """A revalidated copy with some keys changed. ``overrides`` maps a key path — a
        dotted string like ``"coordinator.assignor"``, or a tuple like
        ``("streams", "local.a", "partitions")`` when a name holds dots — to its new
        value; keyword arguments are ``[job]`` keys: ``config.with_overrides(workers=4)``.

        ``dataclasses.replace`` works too, without revalidation.
        """
        from framework.config import parse_config

        document = self.to_dict()
        changes: dict[Any, Any] = {**(overrides or {}), **{("job", k): v for k, v in job.items()}}
        for key, value in changes.items():
            path = tuple(key.split(".")) if isinstance(key, str) else tuple(key)
            table = document
            for part in path[:-1]:
                table = table.setdefault(part, {})
            table[path[-1]] = value
        return parse_config(document, self.path)

    def _relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() if path.is_relative_to(self.root) else str(
            path)


TABLES = tuple(spec.name for spec in fields(JobConfig) if spec.metadata.get("table"))
"""`JobConfig` fields that are top-level tables of the file; the other keys are ``[job]``'s."""


def _document(section: Any, relative: Any) -> dict[str, Any]:
    """A config dataclass as the TOML table it came from: its declared keys and (of a
    `JobConfig`) its tables; None left out, paths made relative."""
    table: dict[str, Any] = {key: getattr(section, spec.name)
                             for spec, _, key in declared(type(section))}
    table.update((spec.name, getattr(section, spec.name)) for spec in fields(section)
                 if spec.metadata.get("table"))
    return {key: _plain(value, relative) for key, value in table.items() if value is not None}


def _plain(value: Any, relative: Any) -> Any:
    if is_dataclass(value):
        return _document(value, relative)
    if isinstance(value, Path):
        return relative(value)
    if isinstance(value, tuple):
        return [_plain(v, relative) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v, relative) for k, v in value.items()}
    return value


def _names(table: Mapping[str, Any]) -> str:
    return ", ".join(sorted(table)) or "none"
