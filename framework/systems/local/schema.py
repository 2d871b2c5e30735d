"""The local log's SQLite file: options, connection pragmas and schema.

One database (``<path>/log.sqlite3``) is shared by every process of a job on the
machine. Each pragma below is set per connection (WAL mode is stored in the file).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from framework.errors import ConfigError, DamagedLogError, SystemUnavailableError
from framework.systems.local.migrate import (
    enable_vacuum,
    has_records_table,
    migrate_records,
    vacuum_enabled,
)

__all__ = ["SCHEMA_VERSION", "LocalOptions", "connect", "damaged_log", "database_file"]

SCHEMA_VERSION = 5
"""2 added ``leases`` (one coordinator per job), 3 ``growth`` (end offsets when a stream
grew), 4 replaced the ``records`` table (a row per record) by ``batches`` (a row per
commit and partition, `framework.systems.local.batch`), 5 made the file
``auto_vacuum = INCREMENTAL`` (pages freed by retention and compaction go back to the
file system) and added ``retention_resets``; older files are upgraded in place when
opened (`framework.systems.local.migrate`)."""

# Stream names map to small integer ids so the batches key is three integers.
# WITHOUT ROWID clusters a small-row table on its primary key: one b-tree, rows in key
# order. Not `batches`: its rows hold blobs of ~10 KiB, which a WITHOUT ROWID table
# spills to overflow pages past ~2 KiB. Measured with bench.local_log_tables (400k
# records, 4 partitions, 250 per partition per commit): a rowid table with the key as a
# UNIQUE index writes at 0.9 us/record against 1.6 for WITHOUT ROWID, reads as fast
# (0.3-0.6 us/record, noisy, either way) and its file is 17 MiB against 27 (the
# row-per-record table of schema 3: 6.6-7.1 us/record to write, 1-2.4 to read).
_SCHEMA = """
CREATE TABLE IF NOT EXISTS streams (
    name        TEXT    PRIMARY KEY,
    id          INTEGER NOT NULL UNIQUE,
    partitions  INTEGER NOT NULL,
    compacted   INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS partitions (
    stream_id   INTEGER NOT NULL,
    partition   INTEGER NOT NULL,
    next_offset INTEGER NOT NULL,
    PRIMARY KEY (stream_id, partition)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS batches (
    stream_id   INTEGER NOT NULL,
    partition   INTEGER NOT NULL,
    base_offset INTEGER NOT NULL,
    last_offset INTEGER NOT NULL,
    count       INTEGER NOT NULL,
    payload     BLOB    NOT NULL,
    UNIQUE (stream_id, partition, base_offset)
);
CREATE TABLE IF NOT EXISTS checkpoints (
    job         TEXT NOT NULL,
    task        TEXT NOT NULL,
    checkpoint  TEXT NOT NULL,
    PRIMARY KEY (job, task)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS fences (
    job         TEXT    PRIMARY KEY,
    epoch       INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS growth (
    stream_id   INTEGER NOT NULL,
    partitions  INTEGER NOT NULL,
    ends        TEXT    NOT NULL,
    grown_ms    INTEGER NOT NULL,
    PRIMARY KEY (stream_id, partitions)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS retention_resets (
    job         TEXT    NOT NULL,
    task        TEXT    NOT NULL,
    stream      TEXT    NOT NULL,
    partition   INTEGER NOT NULL,
    from_offset INTEGER NOT NULL,
    to_offset   INTEGER NOT NULL,
    reset_ms    INTEGER NOT NULL,
    PRIMARY KEY (job, task, stream, partition, to_offset)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS leases (
    job         TEXT    PRIMARY KEY,
    token       TEXT    NOT NULL,
    holder      TEXT    NOT NULL,
    expires_ms  INTEGER NOT NULL
) WITHOUT ROWID;
"""


@dataclass(frozen=True)
class LocalOptions:
    """``client_options`` of a local system (all optional)."""

    busy_timeout_ms: int = 15_000
    """How long a write waits for another process's transaction before the system is
    reported unavailable (`SystemUnavailableError` naming the file)."""

    synchronous: str = "NORMAL"
    """``NORMAL``: a committed transaction survives the death of any process (SIGKILL)
    but the last commits may be lost on power failure or OS crash. ``FULL``: fsync on
    every commit, durable against power loss too, several times slower."""

    cache_size_mb: int = 64
    """Page cache per connection."""

    mmap_size_mb: int = 256
    """Memory-mapped reads: fetches copy from the OS page cache without read() calls."""

    @classmethod
    def from_mapping(cls, system: str, options: Mapping[str, Any]) -> LocalOptions:
        """Validate ``[systems.<system>.client_options]``; unknown keys are errors."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ConfigError(
                f"[systems.{system}.client_options]: unknown option(s) {unknown} for a local "
                f"system; known: {sorted(known)}"
            )
        result = cls(**dict(options))
        if result.synchronous.upper() not in ("NORMAL", "FULL"):
            raise ConfigError(
                f"[systems.{system}.client_options] synchronous = {result.synchronous!r}: "
                "use \"NORMAL\" or \"FULL\""
            )
        return result


def database_file(path: Path) -> Path:
    """Where the log of a local system rooted at ``path`` lives."""
    return path / "log.sqlite3"


def damaged_log(file: Path, error: sqlite3.Error) -> DamagedLogError:
    """The one-line error of a damaged log file: what is wrong and what to do."""
    return DamagedLogError(
        f"local log {file} is damaged ({error}): stop every sampan process using it, then "
        f"put back a backup of the file, or move it away (`mv {file} {file}.damaged`) to "
        f"start an empty log — every stream, changelog and checkpoint of this system is in "
        f"that file")


def connect(path: Path, options: LocalOptions) -> sqlite3.Connection:
    """Open (creating if needed) the log at ``path`` with the tuned pragmas."""
    file = database_file(path)
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: we issue BEGIN IMMEDIATE / COMMIT ourselves.
        conn = sqlite3.connect(
            file, isolation_level=None, check_same_thread=False, cached_statements=256
        )
        conn.execute(f"PRAGMA busy_timeout = {int(options.busy_timeout_ms)}")
        if _is_empty(conn):
            # Larger pages keep more small records per leaf; only effective before
            # the first table is created.
            if conn.execute("PRAGMA page_size").fetchone()[0] < 8192:
                conn.execute("PRAGMA page_size = 8192")
            # Freed pages can be handed back to the file system (`release_free_pages`);
            # a file made before schema 5 is converted once (`migrate.enable_vacuum`).
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        # WAL: readers never block the writer and the writer never blocks readers,
        # across processes; a commit is one append to the -wal file.
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise SystemUnavailableError(
                f"local log {file}: cannot switch to WAL mode (got {mode!r}); the file "
                "must be on a local filesystem that supports shared memory"
            )
        conn.execute(f"PRAGMA synchronous = {options.synchronous.upper()}")
        conn.execute(f"PRAGMA cache_size = {-1024 * int(options.cache_size_mb)}")
        conn.execute(f"PRAGMA mmap_size = {1024 * 1024 * int(options.mmap_size_mb)}")
        conn.execute("PRAGMA temp_store = MEMORY")  # compaction's sort stays off disk
        # After a checkpoint, truncate the -wal file back to this size instead of
        # leaving it at its high-water mark.
        conn.execute(f"PRAGMA journal_size_limit = {64 * 1024 * 1024}")
        _create_schema(conn, file)
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and "disk I/O" not in str(exc):
            raise SystemUnavailableError(
                f"local log {file}: cannot open ({exc}); check the directory is writable "
                "and no other program holds the file locked"
            ) from exc
        raise damaged_log(file, exc) from exc
    except sqlite3.Error as exc:
        raise SystemUnavailableError(
            f"local log {file}: cannot open ({exc}); check the directory is writable "
            "and no other program holds the file locked"
        ) from exc
    return conn


def _is_empty(conn: sqlite3.Connection) -> bool:
    count: int = conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0]
    return count == 0


def _create_schema(conn: sqlite3.Connection, file: Path) -> None:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return
    if version > SCHEMA_VERSION:
        raise SystemUnavailableError(
            f"local log {file} has schema version {version}, newer than this sampan "
            f"({SCHEMA_VERSION}); upgrade sampan"
        )
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        if not has_records_table(conn) and vacuum_enabled(conn):
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    if has_records_table(conn):  # schema 3 or older: its records move into batches
        migrate_records(conn, 4)
    if not vacuum_enabled(conn):  # schema 4 or older: converted by one VACUUM
        enable_vacuum(conn, SCHEMA_VERSION)
