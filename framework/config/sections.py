"""The job file's tables other than ``[job]``, as frozen dataclasses (defaults in the
field docstrings), and `StreamRef`, the one parse of a ``"system.stream"`` name.

`framework.config.model.JobConfig` holds them; every value here has passed validation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, NamedTuple

__all__ = [
    "ERROR_POLICIES",
    "CoordinatorConfig",
    "ErrorPolicy",
    "ErrorsConfig",
    "MetricsConfig",
    "RocksDBConfig",
    "StartPosition",
    "StoreConfig",
    "StreamConfig",
    "StreamRef",
    "SystemConfig",
]

NOT_A_KEY: dict[str, Any] = {"key": None}
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

    name: str = field(metadata=NOT_A_KEY)
    """The table name, e.g. ``local`` in ``[systems.local]``."""
    type: str
    """``"local"`` (embedded SQLite log) or ``"kafka"``. Required."""
    path: Path | None = None
    """local: the log's folder, relative to the job file; default ``data``. None for kafka."""
    bootstrap: str | None = None
    """kafka: ``"host:port[,host:port]"``. Required for kafka; None for local."""
    client_options: Mapping[str, Any] = field(default_factory=dict)
    """Options passed to the system (aiokafka settings, SQLite pragmas); default ``{}``."""
    retention_ms: int | None = None
    """local: default ``retention_ms`` of the system's non-compacted streams; unset keeps
    records forever."""
    retention_bytes: int | None = None
    """local: default ``retention_bytes`` (payload bytes per partition); unset: no bound."""
    retention_mode: str | None = None
    """local: default ``retention_mode``; unset: ``"wait-for-readers"``."""
    root: Path | None = field(default=None, metadata=NOT_A_KEY)
    """The job file's folder: relative paths and user code named in ``client_options``
    (certificates, a token provider) resolve from it."""


StartKind = Literal["oldest", "latest", "time"]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class StartPosition:
    """Where a job starts reading a partition it has no checkpoint on: its ``oldest``
    retained record, its end (``latest``: only what comes next), or the first record
    stamped at or after a ``time`` (the end when none is).

    >>> StartPosition.parse("latest")
    StartPosition(kind='latest', timestamp_ms=None)
    >>> StartPosition.parse("2026-05-01T14:00:00+02:00")
    StartPosition(kind='time', timestamp_ms=1777636800000)
    >>> StartPosition.parse(1777636800000).describe()
    '2026-05-01T12:00:00.000Z'
    """

    kind: StartKind = "oldest"
    timestamp_ms: int | None = None
    """The time of a ``time`` start, in ms since the epoch; None otherwise."""

    FORMS = ('"oldest", "latest", a time with its zone ("2026-05-01T12:00:00Z") or ms '
             "since the epoch (an integer ≥ 0)")
    """What `parse` accepts, for messages."""

    @classmethod
    def parse(cls, value: object) -> StartPosition:
        """``"oldest"``, ``"latest"``, an ISO-8601 time with its zone (a string, or a
        TOML date-time) or ms since the epoch; `ValueError` saying what is accepted."""
        if value in ("oldest", "latest"):
            return cls(value)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return cls("time", value)
        moment = value
        if isinstance(value, str):
            try:
                moment = datetime.fromisoformat(value)
            except ValueError:
                hint = ' (sampan calls it "oldest")' if value == "earliest" else ""
                raise ValueError(f"expected {cls.FORMS}, got {_spelled(value)}{hint}"
                                 ) from None
        if isinstance(moment, datetime):
            if moment.tzinfo is None:
                raise ValueError(f"the time {value!s} has no zone, so it names a different "
                                 f"moment on every machine; add one: "
                                 f"\"{moment.isoformat()}Z\" (UTC) or \"…+02:00\"")
            return cls("time", (moment - _EPOCH) // timedelta(milliseconds=1))
        raise ValueError(f"expected {cls.FORMS}, got {_spelled(value)}")

    def describe(self) -> str:
        """``"oldest"``, ``"latest"`` or the time in UTC, for messages and logs."""
        if self.timestamp_ms is None:
            return self.kind
        moment = datetime.fromtimestamp(self.timestamp_ms / 1000, UTC)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _spelled(value: object) -> str:
    """``value`` as a job file spells it, for messages."""
    if isinstance(value, bool):
        return str(value).lower()
    return json.dumps(value) if isinstance(value, str) else str(value)


@dataclass(frozen=True)
class StreamConfig:
    """``[streams."<system>.<stream>"]``: how a stream's records are (de)serialized."""

    system: str = field(metadata=NOT_A_KEY)
    """The system holding it: the part of the name before the first dot."""
    stream: str = field(metadata=NOT_A_KEY)
    """Its name inside the system: the part after the first dot."""
    key_serde: str = "string"
    """Serde of record keys; default ``"string"``."""
    value_serde: str = "json"
    """Serde of record values; default ``"json"``."""
    partitions: int | None = None
    """Partition count for ``sampan streams create`` and auto-creation; default unset."""
    compacted: bool = False
    """Keep only the latest record per key; default ``false``."""
    retention_ms: int | None = None
    """Local log: delete batches whose newest record is older than this (in the
    background, by the coordinator); default: the system's ``retention_ms``, else keep."""
    retention_bytes: int | None = None
    """Local log: keep at most this many payload bytes per partition, oldest batches go
    first; default: the system's ``retention_bytes``, else no bound."""
    retention_mode: str | None = None
    """``"wait-for-readers"`` (delete only what every reading job committed past) or
    ``"drop-unread"`` (delete regardless; lagging readers are reset and told); default:
    the system's, else wait-for-readers."""
    start_position: str | int | None = None
    """Where a job starts reading a partition of this input it has no checkpoint on
    (`StartPosition`: ``"oldest"``, ``"latest"``, a time with its zone or ms since the
    epoch), fixed when the input first appears in its job model; partitions an expansion
    adds are read from their first record whatever it says. Default: oldest."""

    @property
    def start(self) -> StartPosition:
        """`start_position`, parsed (validated at load)."""
        return StartPosition.parse(self.start_position or "oldest")

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

    name: str = field(metadata=NOT_A_KEY)
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


ErrorPolicy = Literal["fail", "skip", "dead-letter"]
"""What a worker does with a record it cannot decode or process (``[errors]``)."""
ERROR_POLICIES: tuple[ErrorPolicy, ...] = ("fail", "skip", "dead-letter")


@dataclass(frozen=True)
class ErrorsConfig:
    """``[errors]``: what a worker does with a record it cannot decode, or whose `process`
    raises."""

    policy: ErrorPolicy = "fail"
    """Records the serdes cannot decode: ``"fail"`` (stop, naming SSP and offset),
    ``"skip"`` (log and count) or ``"dead-letter"`` (write it to `dead_letter_stream`);
    default ``"fail"``."""
    dead_letter_stream: str | None = None
    """``"system.stream"`` receiving bad records; required iff a policy is dead-letter."""
    process_policy: ErrorPolicy = "fail"
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
    max_unreachable_ms: int = 600000
    """A system of the job (a Kafka cluster) unreachable this long stops the job, with one
    line naming it and what to check; meanwhile workers wait for it. 0 waits for good;
    default 600000 (10 min)."""
    model_changes: str = "in-place"
    """How running workers take a new job model that only adds partitions to their tasks
    (an expansion): ``"in-place"`` (they go on, no restart) or ``"restart"`` (stopped,
    then started on it); default in-place."""
    rebalances: str = "incremental"
    """Several hosts: ``"incremental"`` — a rebalance stops only the tasks that change host
    (`framework.hosts.handover`; needs ``model_changes = "in-place"``); ``"eager"`` — every
    host stops its workers first; default incremental."""
    assignor: str = "sticky"
    """Task → worker placement: ``"sticky"`` or ``"high-availability"``; default sticky."""
    compaction_interval_ms: int = 60000
    """How often the coordinator compacts the job's changelogs and coordinator stream on a
    local log (Kafka compacts by itself); 0 never; default 60000."""
    retention_interval_ms: int = 60000
    """How often the coordinator applies retention to the job's streams on a local log
    (`StreamConfig.retention_ms`); 0 never; default 60000."""
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
    max_rebalance_wait_ms: int = 0
    """Several hosts: a host waiting this long in one rebalance without an assignment gives
    up its group member and joins again as a new one; 0 (default) derives it from the
    session and worker stop timeouts (`framework.hosts.config.rebalance_wait_bound_ms`)."""


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
