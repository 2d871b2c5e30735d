"""The job file's tables other than ``[job]``, as frozen dataclasses whose fields declare
their keys (`framework.config.declare.setting`: kind, bounds, default, meaning).

`framework.config.model.JobConfig` holds them; every value here has passed validation.
Each section is a value of its own, so a component can be given just the one it uses
(`CoordinatorConfig`, `ErrorsConfig`, `MetricsConfig`, a `StoreConfig` …).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from framework.config.declare import NOT_A_KEY, setting
from framework.config.kinds import (
    BOOTSTRAP,
    STREAM_FORM,
    STREAM_NAME,
    Address,
    Flag,
    Folder,
    Integer,
    Nested,
    OneOf,
    OptionalPath,
    Options,
    Port,
    SecretReference,
    Serde,
    StartAt,
    Text,
)
from framework.config.values import StartPosition, StreamRef
from framework.importing import SPEC_PATTERN

__all__ = [
    "ERROR_POLICIES",
    "RETENTION_MODES",
    "SYSTEM_TYPES",
    "CoordinatorConfig",
    "ErrorPolicy",
    "ErrorsConfig",
    "MetricsConfig",
    "QueriesConfig",
    "RocksDBConfig",
    "StartPosition",
    "StoreConfig",
    "StreamConfig",
    "StreamRef",
    "SystemConfig",
]

SYSTEM_TYPES = ("local", "kafka")
"""``[systems.<name>] type``: the kinds of system."""
RETENTION_MODES = ("wait-for-readers", "drop-unread")
"""``retention_mode`` of a local system or stream."""


@dataclass(frozen=True)
class SystemConfig:
    """``[systems.<name>]``: where streams live. The name prefixes stream names."""

    name: str = field(metadata=NOT_A_KEY)
    """The table name, e.g. ``local`` in ``[systems.local]``."""
    type: str = field(metadata=setting(
        OneOf(SYSTEM_TYPES),
        "`local`: the embedded SQLite log; `kafka`: any Kafka-protocol cluster through "
        "aiokafka.", required='"local"'))
    path: Path | None = field(default=None, metadata=setting(
        Folder(), "Folder of the local log (`<path>/log.sqlite3`), relative to the job file.",
        when="local", default="data"))
    bootstrap: str | None = field(default=None, metadata=setting(
        Text('`"host:port[,host:port]"`', '"host:port" or "host:port,host:port"', BOOTSTRAP),
        "The brokers.", when="kafka", required='"127.0.0.1:9092"'))
    client_options: Mapping[str, Any] = field(default_factory=dict, metadata=setting(
        Options(),
        "Options passed to the system, validated when the system opens (unknown keys are "
        "errors): the tables below."))
    retention_ms: int | None = field(default=None, metadata=setting(
        Integer(minimum=1),
        "Default `retention_ms` of every non-compacted stream of this system the job file "
        "declares (a stream's own key wins). Unset: kept forever.", when="local"))
    retention_bytes: int | None = field(default=None, metadata=setting(
        Integer(minimum=1), "Default `retention_bytes` of those streams.", when="local"))
    retention_mode: str | None = field(default=None, metadata=setting(
        OneOf(RETENTION_MODES), "Default `retention_mode` of those streams.", when="local",
        default_doc=f'`"{RETENTION_MODES[0]}"`'))
    root: Path | None = field(default=None, compare=False, metadata=NOT_A_KEY)
    """The job file's folder: relative paths and user code named in ``client_options``
    (certificates, a token provider) resolve from it."""


@dataclass(frozen=True)
class StreamConfig:
    """``[streams."<system>.<stream>"]``: how a stream's records are (de)serialized."""

    system: str = field(metadata=NOT_A_KEY)
    """The system holding it: the part of the name before the first dot."""
    stream: str = field(metadata=NOT_A_KEY)
    """Its name inside the system: the part after the first dot."""
    key_serde: str = field(default="string", metadata=setting(
        Serde(), "Serde of record keys."))
    value_serde: str = field(default="json", metadata=setting(
        Serde(), "Serde of record values."))
    partitions: int | None = field(default=None, metadata=setting(
        Integer(minimum=1),
        "Partition count for `sampan streams create` and for auto-creation by `sampan run`."))
    compacted: bool = field(default=False, metadata=setting(
        Flag(), "Keep only the latest record per key."))
    retention_ms: int | None = field(default=None, metadata=setting(
        Integer(minimum=1),
        "Local log: batches whose newest record timestamp is older than this are deleted by "
        "the coordinator in the background (every `coordinator.retention_interval_ms`). "
        "Refused on a compacted stream and on a Kafka stream (set `retention.ms` on the "
        "topic).", default_doc="the system's"))
    retention_bytes: int | None = field(default=None, metadata=setting(
        Integer(minimum=1),
        "Local log: keep at most this many payload bytes per partition; the oldest whole "
        "batches go first.", default_doc="the system's"))
    retention_mode: str | None = field(default=None, metadata=setting(
        OneOf(RETENTION_MODES),
        "`wait-for-readers`: a batch is deleted only once every job reading this stream has "
        "committed past it — a job reads it from its first job model on, committed or not, "
        "started or stopped (a stopped job loses nothing). `drop-unread`: deleted "
        "regardless; a job behind the new oldest offset is moved to it and `sampan status` "
        "shows `RESET BY RETENTION` with the offsets it lost. See "
        "[systems.md](systems.md#retention).",
        default_doc=f'the system\'s, else `"{RETENTION_MODES[0]}"`'))
    start_position: str | int | None = field(default=None, metadata=setting(
        StartAt(StartPosition.parse),
        "Where the job starts reading this input on a partition it has no checkpoint on: "
        "its oldest retained record, its end (only what comes next), or the first record "
        "stamped at or after the time (the end when none is; ListOffsets by time on Kafka). "
        "Fixed when the input first appears in the job's model (its first `sampan run`, or "
        "the run after it was added to `inputs`): the offsets are written as the tasks' "
        "checkpoints before that model is published, so a restart before the first commit "
        "starts there too, and on the local log retention keeps what lies past them. A job "
        "that has checkpoints on the input ignores it (`sampan streams reset-offsets` moves "
        "them, also before the first run). Partitions an expansion adds are always read "
        "from their first record, whatever it says: records produced into them before the "
        "coordinator sees the growth must not be skipped. A time without a zone is refused. "
        "See [systems.md](systems.md#where-a-job-starts-reading).",
        default_doc=f'`"{StartPosition().kind}"`'))

    @property
    def start(self) -> StartPosition:
        """`start_position`, parsed (validated at load)."""
        if self.start_position is None:
            return StartPosition()
        return StartPosition.parse(self.start_position)

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

    block_cache_mb: int = field(default=32, metadata=setting(
        Integer(minimum=1),
        "LRU cache of data blocks for reads, only with `job.store_memory_mb = 0` (otherwise "
        "the worker's shared cache)."))
    write_buffer_mb: int = field(default=64, metadata=setting(
        Integer(minimum=1), "Memtable size: larger absorbs bigger commits before a flush."))
    max_write_buffers: int = field(default=4, metadata=setting(
        Integer(minimum=2), "Memtables (one active, the rest flushing) before writes stall."))
    compression: str = field(default="lz4", metadata=setting(
        OneOf(("lz4", "zstd", "snappy", "none")),
        "Compression of the upper levels; the bottom level is always zstd."))
    bloom_bits_per_key: int = field(default=10, metadata=setting(
        Integer(minimum=0),
        "Bloom filter bits per key, so `get` of a missing key skips the disk; 0 disables "
        "it."))


@dataclass(frozen=True)
class StoreConfig:
    """``[stores.<name>]``: a key-value store every task gets its own instance of."""

    name: str = field(metadata=NOT_A_KEY)
    """The table name; tasks open it with ``context.store(name)``."""
    type: str = field(default="rocksdb", metadata=setting(
        OneOf(("rocksdb", "memory")),
        "RocksDB on disk under `job.data_dir`, or in process memory (restored fully from "
        "its changelog at every start)."))
    key_serde: str = field(default="string", metadata=setting(
        Serde(), "Serde of keys; `range` and `prefix` follow the serialized key order."))
    value_serde: str = field(default="json", metadata=setting(
        Serde(), "Serde of values."))
    changelog: bool = field(default=True, metadata=setting(
        Flag(),
        "Log every committed write to `<metadata_system>.<job>-<name>-changelog` "
        "(compacted, one partition per task), so the store survives losing its disk and "
        "moving between workers. A job with a logged store is stateful."))
    rocksdb: RocksDBConfig | None = field(default=None, metadata=setting(
        Nested(RocksDBConfig),
        'RocksDB tuning of a `type = "rocksdb"` store: the keys of '
        "`[stores.<name>.rocksdb]`, below.",
        default_doc="the defaults"))
    keyed_by: str | None = field(default=None, metadata=setting(
        Text(form=STREAM_FORM, pattern=STREAM_NAME),
        "Interactive queries ([queries.md](queries.md)): the input (one of `job.inputs`) "
        "whose record keys this store's keys are, so a query for a key goes to the task "
        "that owns that key's input partition. A store without it is not queryable (a "
        "query is refused naming this key)."))
    key_to_input: str | None = field(default=None, metadata=setting(
        Text(form='"module:function"', pattern=SPEC_PATTERN),
        "With `keyed_by`: a `module:function` turning a store key into the `keyed_by` "
        "input's record key (a store keyed by `\"words/<word>\"` for input key `<word>`); "
        "unset: they are equal. Imported from the job file's folder at load."))


ErrorPolicy = Literal["fail", "skip", "dead-letter"]
"""What a worker does with a record it cannot decode or process (``[errors]``)."""
ERROR_POLICIES: tuple[ErrorPolicy, ...] = get_args(ErrorPolicy)


@dataclass(frozen=True)
class ErrorsConfig:
    """``[errors]``: what a worker does with a record it cannot decode, or whose `process`
    raises."""

    policy: ErrorPolicy = field(default="fail", metadata=setting(
        OneOf(ERROR_POLICIES),
        "Records the serdes cannot decode. `fail`: commit what was processed before the "
        "record, then stop the worker with a message naming SSP, offset, serde and the "
        "remedies (this policy, or the `sampan streams reset-offsets … --partition P "
        "--to-offset OFFSET` that skips that one record); `skip`: log, count, move on; "
        "`dead-letter`: write the raw record and the error to `dead_letter_stream`, move "
        "on."))
    dead_letter_stream: str | None = field(default=None, metadata=setting(
        Text('`"system.stream"`', STREAM_FORM, STREAM_NAME),
        'Required iff `policy` or `process_policy` is `"dead-letter"`; must be declared and '
        "must not be an input."))
    process_policy: ErrorPolicy = field(default="fail", metadata=setting(
        OneOf(ERROR_POLICIES),
        "Records whose `StreamTask.process` raises. `fail`: stop the worker with a message "
        "naming task, SSP, offset, the exception and the task's line (the traceback is in "
        "the worker log; the record is processed again after a restart); `skip`: undo what "
        "the failed call wrote to stores, sent and requested, log, count, move on; "
        "`dead-letter`: the same, and write the record, the error and the traceback to "
        "`dead_letter_stream`."))


@dataclass(frozen=True)
class CoordinatorConfig:
    """``[coordinator]``: how the coordinator watches streams and supervises workers."""

    monitor_interval_ms: int = field(default=2000, metadata=setting(
        Integer(minimum=1), "How often partition counts are polled for expansions."))
    worker_stop_timeout_ms: int = field(default=10000, metadata=setting(
        Integer(minimum=0), "Grace after SIGTERM before SIGKILL."))
    worker_restart_backoff_ms: int = field(default=500, metadata=setting(
        Integer(minimum=0),
        "Wait before restarting a crashed worker, doubled per crash in the window (at most "
        "30 s)."))
    max_worker_restarts: int = field(default=5, metadata=setting(
        Integer(minimum=0),
        "Crashes of one worker within `crash_window_ms` before the job gives up (a fenced "
        "worker's exit does not count; an error a restart cannot fix stops the job at its "
        "first exit, see [operations.md](operations.md#an-error-a-restart-cannot-fix))."))
    crash_window_ms: int = field(default=600000, metadata=setting(
        Integer(minimum=1),
        "The sliding window `max_worker_restarts` counts crashes in (10 min)."))
    max_unreachable_ms: int = field(default=600000, metadata=setting(
        Integer(minimum=0),
        "A system of the job (a Kafka cluster) that has not answered this long stops the "
        "job: `sampan run` exits 2 with one line naming the brokers and what to check, and "
        "`sampan status` says failed; until then workers wait in their processes and resume "
        "from their last commit when it answers (no restarts). `0` waits for good. See "
        "[operations.md](operations.md#broker-failures)."))
    model_changes: str = field(default="in-place", metadata=setting(
        OneOf(("in-place", "restart")),
        "How running workers take a new job model that changes the inputs' partitions (an "
        "expansion, a hold placed or released; on one host or several) or, with several "
        "hosts, moves tasks: `in-place` — each worker goes on in its process, commits, and "
        "initialises again only the tasks that gained partitions (stores stay open; a hold "
        "only stops reads of the held partitions); `restart` — every worker is stopped and "
        "started on the new model. A change of the job file restarts the workers either "
        "way. See [coordinator.md](coordinator.md#expansion-in-place)."))
    rebalances: str = field(default="incremental", metadata=setting(
        OneOf(("incremental", "eager")),
        "Several hosts: `incremental` — a rebalance (a host joining, leaving or failing, a "
        "probing one) stops only the tasks that change host: a first model parks them, "
        "their workers let them go in place, and a follow-up model places them on their new "
        "hosts, whose workers add them in place; no worker restarts. `eager` — every host "
        "stops its workers before it rejoins and starts them on the new model. Incremental "
        'needs `model_changes = "in-place"`. See '
        "[hosts.md](hosts.md#incremental-rebalancing-a-task-moves-in-two-models)."))
    assignor: str = field(default="sticky", metadata=setting(
        OneOf(("sticky", "high-availability")),
        "Task → worker placement. `high-availability` is restore-gap-aware: tasks go to "
        "workers whose reported local stores are caught up (see "
        "[coordinator.md](coordinator.md))."))
    compaction_interval_ms: int = field(default=60000, metadata=setting(
        Integer(minimum=0),
        "How often the coordinator compacts the job's changelogs and coordinator stream on "
        "a local log (one record per key stays); `0` never. Kafka compacts by itself."))
    retention_interval_ms: int = field(default=60000, metadata=setting(
        Integer(minimum=0),
        "How often the coordinator applies the retention of the job's declared local "
        "streams (`retention_ms`, `retention_bytes`) and gives the freed pages back to the "
        "file system; `0` never. Kafka brokers apply their own retention."))
    lease_timeout_ms: int = field(default=10000, metadata=setting(
        Integer(minimum=1000),
        "One coordinator per job: a coordinator that stops renewing its job's lease this "
        "long is replaced by the next `sampan run` (at once when it ran on the same host "
        "and its process is gone), and `sampan status` reports it not running. On a Kafka "
        "metadata system the lease is a group membership: with KIP-848's consumer group "
        "protocol (Apache Kafka 4.0+) its session timeout is the broker's "
        "`group.consumer.session.timeout.ms` (45 s by default; a dead holder on the same "
        "host is removed at once), with the classic protocol (other brokers) "
        "`max(lease_timeout_ms, 6000)`: brokers refuse sessions shorter than their "
        "`group.min.session.timeout.ms` (6 s by default)."))
    session_timeout_ms: int = field(default=10000, metadata=setting(
        Integer(minimum=1000),
        "Several hosts: the Kafka group session timeout — a host silent this long (crashed, "
        "SIGKILLed, cut off) is removed from the job's group and its tasks fail over. A "
        "host stopped with SIGTERM leaves at once (after this timeout when it is stopped "
        "inside a rebalance it leads, see [hosts.md](hosts.md#failover-and-leaving))."))
    acceptable_recovery_lag: int = field(default=10000, metadata=setting(
        Integer(minimum=0),
        "Several hosts: a host whose copy of a task's stores is at most this many changelog "
        "records behind is caught up and may take the task as active (KIP-441)."))
    max_warmup_replicas: int = field(default=2, metadata=setting(
        Integer(minimum=0), "Several hosts: warmup copies restoring at once over the whole job."))
    probing_rebalance_interval_ms: int = field(default=60000, metadata=setting(
        Integer(minimum=1000),
        "Several hosts: while warmups restore, how often a probing rebalance checks whether "
        "they caught up."))
    max_rebalance_wait_ms: int = field(default=0, metadata=setting(
        Integer(minimum=0),
        "Several hosts: a host that waits this long in one rebalance without receiving an "
        "assignment gives up its group member and joins again as a new one, logging a "
        "WARNING ([hosts.md](hosts.md#a-bound-on-every-rebalance)). `0`: the longest a "
        "sound round takes, `3 × session_timeout_ms + worker_stop_timeout_ms + 80000` (120 "
        "s with the defaults; `framework.hosts.config.rebalance_wait_bound_ms`)."))


@dataclass(frozen=True)
class MetricsConfig:
    """``[metrics]``: the Prometheus ``/metrics`` endpoint of the coordinator and each worker."""

    enabled: bool = field(default=True, metadata=setting(
        Flag(), "Serve `/metrics` and record figures; `false` turns both off."))
    bind: str = field(default="127.0.0.1", metadata=setting(
        Address(),
        'The address the endpoints listen on (this machine only by default); `"0.0.0.0"` '
        "to be scraped from another machine."))
    port: int = field(default=0, metadata=setting(
        Port(),
        "`0`: every process takes a free port (written to the coordinator stream, listed by "
        "`sampan status`). `N`: the coordinator listens on `N` and worker `i` on `N + 1 + "
        "i` — fixed ports for a scrape config; `N + workers` must stay ≤ 65535. Several "
        "hosts (`--host`): worker ids are job-wide, and with a fixed `N` a machine runs one "
        "host of the job (a second one exits 2, see [hosts.md](hosts.md#metrics-and-logs))."))
    lag_interval_ms: int = field(default=1000, metadata=setting(
        Integer(minimum=10),
        "How often a worker reads its inputs' end offsets for `sampan_input_lag_records`."))

    def worker_port(self, worker: int) -> int:
        """The port worker ``worker`` listens on (0: any free port)."""
        return self.port + 1 + worker if self.port else 0


@dataclass(frozen=True)
class QueriesConfig:
    """``[queries]``: each worker's read-only HTTP endpoint for the stores its tasks own
    (docs/queries.md)."""

    enabled: bool = field(default=False, metadata=setting(
        Flag(), "Serve interactive queries from every worker."))
    bind: str = field(default="127.0.0.1", metadata=setting(
        Address(),
        'The address the query endpoints listen on (this machine only by default); '
        '`"0.0.0.0"` to answer other machines (set a `token` then).'))
    port: int = field(default=0, metadata=setting(
        Port(),
        "`0`: each worker takes a free port (its last one when free again), written to the "
        "coordinator stream, where clients and the other endpoints find it. `N`: worker `i` "
        "listens on `N + i` (`N + workers` must stay ≤ 65535; with several hosts one host "
        "of the job per machine)."))
    advertised_host: str | None = field(default=None, metadata=setting(
        Text(form="a host name or IP address"),
        "How the other endpoints and clients reach this machine's endpoints; unset: the "
        "`bind` address, or the machine's host name when it binds every address.",
        default_doc="`bind`"))
    token: str | None = field(default=None, metadata=setting(
        SecretReference(),
        "A bearer token every request must carry (`Authorization: Bearer …`), given as "
        "`\"${NAME}\"`: the environment variable of every process of the job and of its "
        "clients (never written in the file, never printed)."))
    token_file: Path | None = field(default=None, metadata=setting(
        OptionalPath(), "A file holding the bearer token instead of `token`."))
    forward_timeout_ms: int = field(default=5000, metadata=setting(
        Integer(minimum=1),
        "How long an endpoint waits for the endpoint it forwards a query to."))
    retry_after_ms: int = field(default=1000, metadata=setting(
        Integer(minimum=1),
        "The `Retry-After` of a key whose task is moving or restoring (HTTP 503), rounded "
        "up to whole seconds in the header; the body has the milliseconds."))

    def worker_port(self, worker: int) -> int:
        """The port worker ``worker`` listens on (0: any free port)."""
        return self.port + worker if self.port else 0
