"""Upgrades of an older local log: schema 3's records into batches, schema 4's file
into an incremental-vacuum one.

Schema 3 → 4: upgrade of a schema-3 local log (a ``records`` row per record) to record batches.

The records move oldest first, one partition at a time, `MIGRATE_CHUNK` records per
``BEGIN IMMEDIATE`` transaction: each transaction writes the chunk's batches and deletes
the same rows, so a process killed mid-migration leaves every record in exactly one of
the two tables, and the next open (by any process) carries on where it stopped. The last
transaction drops ``records`` and sets the schema version. Several processes opening the
file at once share the work under SQLite's write lock.
"""

from __future__ import annotations

import sqlite3

from framework.systems.local.batch import batch_rows

__all__ = [
    "MIGRATE_CHUNK", "enable_vacuum", "has_records_table", "migrate_records",
    "vacuum_enabled",
]

MIGRATE_CHUNK = 50_000
"""Records moved per transaction."""

_INSERT_BATCH = "INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?)"


def has_records_table(conn: sqlite3.Connection) -> bool:
    """Whether the file still holds schema 3's ``records`` table."""
    return conn.execute("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND "
                        "name = 'records'").fetchone() is not None


def migrate_records(conn: sqlite3.Connection, version: int, chunk: int = MIGRATE_CHUNK,
                    transactions: int | None = None) -> bool:
    """Move every ``records`` row into ``batches``; True once ``records`` is gone and the
    file is at schema ``version``. ``transactions`` stops after that many (False: not
    done yet), which is how the tests interrupt a migration."""
    done = 0
    while transactions is None or done < transactions:
        conn.execute("BEGIN IMMEDIATE")
        try:
            finished = _step(conn, version, chunk)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if finished:
            return True
        done += 1
    return False


def _step(conn: sqlite3.Connection, version: int, chunk: int) -> bool:
    """One transaction's work: move one chunk, or finish when none is left."""
    if not has_records_table(conn):  # another process finished meanwhile
        return True
    slot = conn.execute("SELECT stream_id, partition FROM records LIMIT 1").fetchone()
    if slot is None:
        conn.execute("DROP TABLE records")
        conn.execute(f"PRAGMA user_version = {int(version)}")
        return True
    stream_id, partition = slot
    rows = conn.execute(
        "SELECT offset, key, value, timestamp, headers FROM records WHERE stream_id = ? "
        "AND partition = ? ORDER BY offset LIMIT ?", (stream_id, partition, chunk)).fetchall()
    offsets, keys, values, timestamps, headers = (
        list(column) for column in zip(*rows, strict=True))
    conn.executemany(_INSERT_BATCH, batch_rows(
        stream_id, partition, offsets, keys, values, timestamps, headers))
    conn.execute("DELETE FROM records WHERE stream_id = ? AND partition = ? AND offset <= ?",
                 (stream_id, partition, offsets[-1]))
    return False


def vacuum_enabled(conn: sqlite3.Connection) -> bool:
    """Whether the file is ``auto_vacuum = INCREMENTAL`` (schema 5 and newer files)."""
    mode: int = conn.execute("PRAGMA auto_vacuum").fetchone()[0]
    return mode == 2


def enable_vacuum(conn: sqlite3.Connection, version: int) -> None:
    """Schema 4 → 5: make the file ``auto_vacuum = INCREMENTAL``, which SQLite only
    applies by rewriting the whole file once (VACUUM: one transaction, so a process
    killed mid-way leaves the old file and the next open starts again), then set the
    version. Takes as long as copying the file; other processes wait on its lock."""
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    conn.execute("VACUUM")
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(f"PRAGMA user_version = {int(version)}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
