"""The validated job configuration: `JobConfig` (``[job]`` and the tables of
`framework.config.sections`), frozen, defaults in the field docstrings.

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
from typing import Any, Literal

from framework.config.schema import did_you_mean, did_you_mean_stream
from framework.config.sections import (
    ERROR_POLICIES,
    NOT_A_KEY,
    CoordinatorConfig,
    ErrorPolicy,
    ErrorsConfig,
    MetricsConfig,
    RocksDBConfig,
    StartPosition,
    StoreConfig,
    StreamConfig,
    StreamRef,
    SystemConfig,
)
from framework.errors import ConfigError
from framework.secrets import without_secrets

__all__ = [
    "ERROR_POLICIES",
    "EXPANSIONS",
    "GROUPERS",
    "GUARANTEES",
    "CoordinatorConfig",
    "ErrorPolicy",
    "ErrorsConfig",
    "Expansion",
    "Grouper",
    "Guarantee",
    "JobConfig",
    "MetricsConfig",
    "RocksDBConfig",
    "StartPosition",
    "StoreConfig",
    "StreamConfig",
    "StreamRef",
    "SystemConfig",
]

Grouper = Literal["partition", "system-stream-partition", "single"]
"""``job.grouper``: how input partitions become tasks."""
GROUPERS: tuple[Grouper, ...] = ("partition", "system-stream-partition", "single")

Expansion = Literal["fixed-tasks", "regroup"]
"""``job.expansion``: what a stateful job does when its inputs gain partitions."""
EXPANSIONS: tuple[Expansion, ...] = ("fixed-tasks", "regroup")

Guarantee = Literal["exactly-once", "at-least-once"]
"""``job.guarantee``: how outputs, changelogs and checkpoints commit together."""
GUARANTEES: tuple[Guarantee, ...] = ("exactly-once", "at-least-once")


@dataclass(frozen=True)
class JobConfig:
    """A whole job file, validated. Paths are absolute, resolved against the file's folder."""

    path: Path = field(metadata=NOT_A_KEY)
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
    input_idle_timeout_ms: int = 30000
    """An input partition read to its end that has delivered nothing this long stops
    holding back the event-time watermark of `framework.windows` (``source="records"``)
    until it delivers again; 0 never; default 30000."""
    grouper: Grouper = "partition"
    """``"partition"``, ``"system-stream-partition"`` or ``"single"``; default partition."""
    expansion: Expansion = "fixed-tasks"
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
    store_memory_mb: int = 256
    """One memory bound per worker for all its RocksDB stores: a block cache of this
    size shared by every store of every task of the worker, with the memtables (write
    buffers) charged to it and capped at half of it; 0: each store has its own cache
    and write buffers (``[stores.<name>.rocksdb]``); default 256."""
    task_timeout_ms: int = 60000
    standby_replicas: int = 0
    """``job.standby_replicas``: copies of each task's stores kept current on other hosts
    (several hosts over Kafka only); default 0."""
    """A task whose ``process`` or ``window`` call runs this long without returning is
    reported (task, SSP, offset) and its worker restarted; 0 disables; default 60000."""
    guarantee: Guarantee = "exactly-once"
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

        Derived from the dataclass fields (a new key appears here by being a field)."""
        document = _document(self, self._relative)
        tables = {name: document.pop(name) for name in TABLES}
        return {"job": document, **tables}

    @cached_property
    def digest(self) -> str:
        """sha256 of the canonical JSON of `to_dict` without its secrets: equal for equal
        configurations, whatever the key order, which defaults the file spells out, and
        whether a password is written or referred to (``${VAR}``)."""
        canonical = json.dumps(without_secrets(self.to_dict()), sort_keys=True,
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
