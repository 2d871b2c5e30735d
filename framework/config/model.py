"""The validated job configuration: frozen dataclasses, defaults in the field docstrings.

Build them with `framework.config.load_config`; every value here has passed validation.
`JobConfig` adds the derived names the runtime shares (changelog and coordinator
streams, the one definition of "stateful"). Loading the user code the file names is
`framework.usercode`'s job: these objects stay plain data.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

from framework.errors import ConfigError

__all__ = [
    "CoordinatorConfig",
    "ErrorsConfig",
    "JobConfig",
    "MetricsConfig",
    "RocksDBConfig",
    "StoreConfig",
    "StreamConfig",
    "StreamRef",
    "SystemConfig",
]


_NOT_A_KEY: dict[str, Any] = {"key": None}
"""Field metadata: the field is derived (a table's name, the file's path), not a key."""


class StreamRef(NamedTuple):
    """A stream named by its system and its name inside it, the one parse of
    ``"system.stream"`` (the system is the part before the first dot).

    >>> ref = StreamRef.parse("local.page.views")
    >>> ref.system, ref.stream, str(ref)
    ('local', 'page.views', 'local.page.views')
    """

    system: str
    stream: str

    @classmethod
    def parse(cls, qualified: str) -> StreamRef:
        system, _, stream = qualified.partition(".")
        return cls(system, stream)

    @property
    def qualified(self) -> str:
        """``"system.stream"``, as job files and `MessageCollector.send` name it."""
        return f"{self.system}.{self.stream}"

    def __str__(self) -> str:
        return self.qualified


@dataclass(frozen=True)
class SystemConfig:
    """``[systems.<name>]``: where streams live. The name prefixes stream names."""

    name: str = field(metadata=_NOT_A_KEY)
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

    system: str = field(metadata=_NOT_A_KEY)
    """The system holding it: the part of the name before the first dot."""
    stream: str = field(metadata=_NOT_A_KEY)
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

    @property
    def ref(self) -> StreamRef:
        return StreamRef(self.system, self.stream)


@dataclass(frozen=True)
class RocksDBConfig:
    """``[stores.<name>.rocksdb]``: RocksDB tuning of a ``rocksdb`` store, per task
    instance (each task's store is its own database)."""

    block_cache_mb: int = 32
    """LRU cache of data blocks for reads; default 32."""
    write_buffer_mb: int = 64
    """Memtable size; bigger absorbs larger commits before a flush; default 64."""
    max_write_buffers: int = 4
    """Memtables before writes stall while flushes catch up; default 4."""
    compression: str = "lz4"
    """``"lz4"``, ``"zstd"``, ``"snappy"`` or ``"none"`` for the upper levels (the
    bottom level is always zstd); default lz4."""
    bloom_bits_per_key: int = 10
    """Bloom filter bits per key (0 disables): skips disk reads of missing keys; default 10."""


@dataclass(frozen=True)
class StoreConfig:
    """``[stores.<name>]``: a key-value store every task gets its own instance of."""

    name: str = field(metadata=_NOT_A_KEY)
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
    rocksdb: RocksDBConfig | None = None
    """``[stores.<name>.rocksdb]`` of a rocksdb store (None: the defaults, or a memory store)."""


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
    session_timeout_ms: int = 10000
    """Several hosts (`sampan run --host`): a host silent this long leaves the job's group
    and its tasks fail over to the others; default 10000."""
    acceptable_recovery_lag: int = 10000
    """Several hosts: a host whose copy of a task's state is at most this many changelog
    records behind is caught up and may take the task as active; default 10000."""
    max_warmup_replicas: int = 2
    """Several hosts: warmup copies restoring at once over the whole job; default 2."""
    probing_rebalance_interval_ms: int = 60000
    """Several hosts: how often a rebalance checks whether warmups caught up; default 60000."""


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

    path: Path = field(metadata=_NOT_A_KEY)
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
    expansion_algorithm_spec: str = field(default="default",
                                          metadata={"key": "expansion_algorithm"})
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
    standby_replicas: int = 0
    """``job.standby_replicas``: copies of each task's stores kept current on other hosts
    (several hosts over Kafka only); default 0."""
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

        Derived from the dataclass fields (a new key appears here by being a field)."""
        document = _document(self, self._relative)
        tables = {name: document.pop(name) for name in TABLES}
        return {"job": document, **tables}

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

    def _relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() if path.is_relative_to(self.root) else str(
            path)


TABLES = ("errors", "coordinator", "metrics", "systems", "streams", "stores")
"""`JobConfig` fields that are top-level tables of the file; the other keys are ``[job]``'s."""


def _document(section: Any, relative: Any) -> dict[str, Any]:
    """A config dataclass as the TOML table it came from: keys by field (renamed by the
    ``key`` metadata, derived fields left out), None left out, paths made relative."""
    table: dict[str, Any] = {}
    for spec in fields(section):
        key = spec.metadata.get("key", spec.name)
        value = getattr(section, spec.name)
        if key is not None and value is not None:
            table[key] = _plain(value, relative)
    return table


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
