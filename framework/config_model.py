"""The validated job configuration: frozen dataclasses, defaults in the field docstrings.

Build them with `framework.config.load_config`; every value here has passed validation.
`JobConfig` adds the derived names the runtime shares (changelog and coordinator
streams, the one definition of "stateful") and loads the user code the file names.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from framework.api import StreamTask
from framework.config_imports import ImportSpecError, import_spec
from framework.errors import ConfigError, TaskLoadError
from groupers.expansion import DefaultPartitionExpansionAlgorithm, PartitionExpansionAlgorithm

__all__ = [
    "CoordinatorConfig",
    "ErrorsConfig",
    "JobConfig",
    "MetricsConfig",
    "StoreConfig",
    "StreamConfig",
    "SystemConfig",
]


@dataclass(frozen=True)
class SystemConfig:
    """``[systems.<name>]``: where streams live. The name prefixes stream names."""

    name: str
    """The table name, e.g. ``local`` in ``[systems.local]``."""
    type: str
    """``"local"`` (embedded SQLite log) or ``"kafka"``. Required."""
    path: Path | None = None
    """local: the log's folder, relative to the job file; default ``data``. None for kafka."""
    bootstrap: str | None = None
    """kafka: ``"host:port[,host:port]"``. Required for kafka; None for local."""
    client_options: Mapping[str, Any] = field(default_factory=dict)
    """Options passed to the system (aiokafka settings, SQLite pragmas); default ``{}``."""


@dataclass(frozen=True)
class StreamConfig:
    """``[streams."<system>.<stream>"]``: how a stream's records are (de)serialized."""

    system: str
    """The system holding it: the part of the name before the first dot."""
    stream: str
    """Its name inside the system: the part after the first dot."""
    key_serde: str = "string"
    """Serde of record keys; default ``"string"``."""
    value_serde: str = "json"
    """Serde of record values; default ``"json"``."""
    partitions: int | None = None
    """Partition count for ``sampan streams create`` and auto-creation; default unset."""
    compacted: bool = False
    """Keep only the latest record per key; default ``false``."""

    @property
    def qualified(self) -> str:
        """``"system.stream"``, as the job file and `MessageCollector.send` name it."""
        return f"{self.system}.{self.stream}"


@dataclass(frozen=True)
class StoreConfig:
    """``[stores.<name>]``: a key-value store every task gets its own instance of."""

    name: str
    """The table name; tasks open it with ``context.store(name)``."""
    type: str = "rocksdb"
    """``"rocksdb"`` (on disk under ``job.data_dir``) or ``"memory"``; default rocksdb."""
    key_serde: str = "string"
    """Serde of keys; default ``"string"``. Ranges follow the serialized key order."""
    value_serde: str = "json"
    """Serde of values; default ``"json"``."""
    changelog: bool = True
    """Log every write to a changelog stream, so the store survives losing its disk and
    moving between workers; default ``true``. A job with a logged store is stateful."""


@dataclass(frozen=True)
class ErrorsConfig:
    """``[errors]``: what a worker does with a record it cannot decode, or whose `process`
    raises."""

    policy: str = "fail"
    """Records the serdes cannot decode: ``"fail"`` (stop, naming SSP and offset),
    ``"skip"`` (log and count) or ``"dead-letter"`` (write it to `dead_letter_stream`);
    default ``"fail"``."""
    dead_letter_stream: str | None = None
    """``"system.stream"`` receiving bad records; required iff a policy is dead-letter."""
    process_policy: str = "fail"
    """Records whose `StreamTask.process` raises: ``"fail"``, ``"skip"`` or
    ``"dead-letter"`` (the dead letter carries the record and the traceback). Under skip
    and dead-letter, what the failed call sent or wrote is undone; default ``"fail"``."""


@dataclass(frozen=True)
class CoordinatorConfig:
    """``[coordinator]``: how the coordinator watches streams and supervises workers."""

    monitor_interval_ms: int = 2000
    """How often partition counts are polled for expansions; default 2000."""
    worker_stop_timeout_ms: int = 10000
    """Grace after SIGTERM before SIGKILL; default 10000."""
    worker_restart_backoff_ms: int = 500
    """Wait before restarting a crashed worker; default 500."""
    max_worker_restarts: int = 5
    """Crashes of one worker within `crash_window_ms` before the job gives up; default 5."""
    crash_window_ms: int = 600000
    """The sliding window `max_worker_restarts` counts crashes in; default 600000 (10 min)."""
    assignor: str = "sticky"
    """Task → worker placement: ``"sticky"`` or ``"high-availability"``; default sticky."""
    compaction_interval_ms: int = 60000
    """How often the coordinator compacts the job's changelogs and coordinator stream on a
    local log (Kafka compacts by itself); 0 never; default 60000."""
    lease_timeout_ms: int = 10000
    """A coordinator that stops renewing its job's lease this long is replaced by the next
    `sampan run` (one coordinator per job); default 10000."""


@dataclass(frozen=True)
class MetricsConfig:
    """``[metrics]``: the Prometheus ``/metrics`` endpoint of the coordinator and each worker."""

    enabled: bool = True
    """Serve ``/metrics`` and record figures; default ``true``."""
    bind: str = "127.0.0.1"
    """The IP address the endpoints listen on; default ``"127.0.0.1"`` (this machine only)."""
    port: int = 0
    """0: every process takes a free port (written to the coordinator stream, listed by
    ``sampan status``). N > 0: the coordinator listens on N and worker ``i`` on N + 1 + i,
    fixed ports for a Prometheus scrape config; default 0."""
    lag_interval_ms: int = 1000
    """How often a worker reads its inputs' end offsets for input lag; default 1000."""

    def worker_port(self, worker: int) -> int:
        """The port worker ``worker`` listens on (0: any free port)."""
        return self.port + 1 + worker if self.port else 0


@dataclass(frozen=True)
class JobConfig:
    """A whole job file, validated. Paths are absolute, resolved against the file's folder."""

    path: Path
    """The job file (absolute)."""
    name: str
    """``job.name``: ``[A-Za-z0-9][A-Za-z0-9_.-]*``; names the job's metadata streams."""
    task: str
    """``job.task``: ``"module:Class"`` of a `StreamTask`, importable from `root`."""
    inputs: tuple[str, ...]
    """``job.inputs``: ``"system.stream"`` names grouped into tasks. Non-empty."""
    broadcast_inputs: tuple[str, ...] = ()
    """Streams every task consumes in full; default none."""
    workers: int = 1
    """Worker processes; default 1."""
    commit_interval_ms: int = 1000
    """How often each task commits; default 1000."""
    window_interval_ms: int = 1000
    """How often `StreamTask.window` runs; default 1000."""
    grouper: str = "partition"
    """``"partition"``, ``"system-stream-partition"`` or ``"single"``; default partition."""
    expansion: str = "fixed-tasks"
    """``"fixed-tasks"`` keeps keys on their task when inputs expand; ``"regroup"`` is
    the plain grouper that miscounts (for drills). Default fixed-tasks."""
    expansion_algorithm_spec: str = "default"
    """``job.expansion_algorithm``: ``"default"`` or ``"module:Class"``."""
    data_dir: Path = Path("state")
    """Where the job keeps its local state, in ``<data_dir>/<job name>/``: stores
    (``stores/<store>/<task>``), worker logs (``logs/``), run files; default ``state``."""
    metadata_system: str = ""
    """System of the coordinator stream, checkpoints and changelogs; default: the
    system of the first input."""
    write_buffer_max_keys: int = 100000
    """Keys a task's store write buffers hold before forcing a commit; default 100000."""
    fetch_max_records: int = 1000
    """Records per fetch; default 1000."""
    store_restore_batch: int = 10000
    """Changelog records per restore write batch; default 10000."""
    task_timeout_ms: int = 60000
    """A task whose ``process`` or ``window`` call runs this long without returning is
    reported (task, SSP, offset) and its worker restarted; 0 disables; default 60000."""
    guarantee: str = "exactly-once"
    """``"exactly-once"`` or ``"at-least-once"``; default exactly-once when the metadata
    system is local, at-least-once on kafka. Exactly-once on Kafka needs transactions."""
    errors: ErrorsConfig = field(default_factory=ErrorsConfig)
    """``[errors]``."""
    coordinator: CoordinatorConfig = field(default_factory=CoordinatorConfig)
    """``[coordinator]``."""
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    """``[metrics]``."""
    systems: Mapping[str, SystemConfig] = field(default_factory=dict)
    """``[systems.*]`` by name."""
    streams: Mapping[str, StreamConfig] = field(default_factory=dict)
    """``[streams.*]`` by qualified name."""
    stores: Mapping[str, StoreConfig] = field(default_factory=dict)
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
            )
        return found

    def system(self, name: str) -> SystemConfig:
        """The declared system ``name``; `ConfigError` saying how to declare it."""
        found = self.systems.get(name)
        if found is None:
            raise ConfigError(
                f'system "{name}" is not declared in {self.path}; add a [systems.{name}] '
                f"table (declared: {_names(self.systems)})"
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
        self.store(store)
        return f"{self.metadata_system}.{self.name}-{store}-changelog"

    @property
    def coordinator_stream(self) -> str:
        """``"<metadata_system>.__sampan-<job>-coordinator"``, the job's memory."""
        return f"{self.metadata_system}.__sampan-{self.name}-coordinator"

    def to_dict(self) -> dict[str, Any]:
        """The configuration as a TOML-shaped document with every default filled in and
        paths relative to `root` where they lie inside it; `parse_config` accepts it."""
        job = {
            "name": self.name, "task": self.task, "inputs": list(self.inputs),
            "broadcast_inputs": list(self.broadcast_inputs), "workers": self.workers,
            "commit_interval_ms": self.commit_interval_ms,
            "window_interval_ms": self.window_interval_ms, "grouper": self.grouper,
            "expansion": self.expansion, "expansion_algorithm": self.expansion_algorithm_spec,
            "data_dir": self._relative(self.data_dir),
            "metadata_system": self.metadata_system,
            "write_buffer_max_keys": self.write_buffer_max_keys,
            "fetch_max_records": self.fetch_max_records,
            "store_restore_batch": self.store_restore_batch,
            "task_timeout_ms": self.task_timeout_ms,
            "guarantee": self.guarantee,
        }
        systems = {name: _without_none({
            "type": s.type, "path": None if s.path is None else self._relative(s.path),
            "bootstrap": s.bootstrap, "client_options": dict(s.client_options),
        }) for name, s in self.systems.items()}
        streams = {q: _without_none({
            "key_serde": s.key_serde, "value_serde": s.value_serde,
            "partitions": s.partitions, "compacted": s.compacted,
        }) for q, s in self.streams.items()}
        stores = {name: {
            "type": s.type, "key_serde": s.key_serde, "value_serde": s.value_serde,
            "changelog": s.changelog,
        } for name, s in self.stores.items()}
        return {
            "job": job,
            "errors": _without_none({"policy": self.errors.policy,
                                     "process_policy": self.errors.process_policy,
                                     "dead_letter_stream": self.errors.dead_letter_stream}),
            "coordinator": {
                "monitor_interval_ms": self.coordinator.monitor_interval_ms,
                "worker_stop_timeout_ms": self.coordinator.worker_stop_timeout_ms,
                "worker_restart_backoff_ms": self.coordinator.worker_restart_backoff_ms,
                "max_worker_restarts": self.coordinator.max_worker_restarts,
                "crash_window_ms": self.coordinator.crash_window_ms,
                "assignor": self.coordinator.assignor,
                "lease_timeout_ms": self.coordinator.lease_timeout_ms,
                "compaction_interval_ms": self.coordinator.compaction_interval_ms,
            },
            "metrics": {"enabled": self.metrics.enabled, "bind": self.metrics.bind,
                        "port": self.metrics.port,
                        "lag_interval_ms": self.metrics.lag_interval_ms},
            "systems": systems, "streams": streams, "stores": stores,
        }

    @cached_property
    def digest(self) -> str:
        """sha256 of the canonical JSON of `to_dict`: equal for equal configurations,
        whatever the key order or which defaults the file spells out."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"),
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

    def load_task_class(self) -> type[StreamTask]:
        """Import ``job.task`` with `root` first on ``sys.path``; `TaskLoadError` names the
        module, class and file, and the fix."""
        where = f'job.task = "{self.task}" in {self.path}'
        try:
            target = import_spec(self.task, self.root)
        except ImportSpecError as error:
            raise TaskLoadError(f"{where}: {error}") from None
        if not (isinstance(target, type) and issubclass(target, StreamTask)):
            name = self.task.partition(":")[2]
            kind = "a class" if isinstance(target, type) else type(target).__name__
            raise TaskLoadError(
                f"{where}: {self.task} is {kind}, not a StreamTask subclass; define "
                f"`class {name}(StreamTask)` with `from framework.api import StreamTask`"
            )
        return target

    def expansion_algorithm(self) -> PartitionExpansionAlgorithm:
        """A new instance of ``job.expansion_algorithm`` (SEP-5's default unless named)."""
        if self.expansion_algorithm_spec == "default":
            return DefaultPartitionExpansionAlgorithm()
        return make_expansion_algorithm(self.expansion_algorithm_spec, self.root)


    def _relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() if path.is_relative_to(self.root) else str(
            path)


def make_expansion_algorithm(spec: str, root: Path) -> PartitionExpansionAlgorithm:
    """Import and instantiate a custom algorithm; `ConfigError` (message without the key
    path: callers add it) when it is missing or lacks ``partition_before_expansion``."""
    try:
        target = import_spec(spec, root)
        instance = target() if isinstance(target, type) else target
    except ImportSpecError as error:
        raise ConfigError(str(error)) from None
    except Exception as error:
        raise ConfigError(f"{spec}() raised {type(error).__name__}: {error}") from None
    if not isinstance(instance, PartitionExpansionAlgorithm):
        raise ConfigError(
            f"{spec} does not implement partition_before_expansion(partition, "
            "current_count, initial_count) -> int"
        )
    return instance


def _names(table: Mapping[str, Any]) -> str:
    return ", ".join(sorted(table)) or "none"


def _without_none(table: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in table.items() if v is not None}
