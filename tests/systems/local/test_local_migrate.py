"""A schema-3 local log (a ``records`` row per record) opens with every record intact."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from framework.systems.base import Checkpoint, ProducerRecord
from framework.systems.checkpoint_json import checkpoint_to_json
from framework.systems.local.batch import encode_headers
from framework.systems.local.migrate import has_records_table, migrate_records
from framework.systems.local.schema import SCHEMA_VERSION, LocalOptions, connect
from framework.systems.local.system import LocalSystem
from groupers import SystemStreamPartition as SSP

# Schema 3's tables as sampan 3 created them (the records table is what changed).
OLD_SCHEMA = """
CREATE TABLE streams (name TEXT PRIMARY KEY, id INTEGER NOT NULL UNIQUE,
    partitions INTEGER NOT NULL, compacted INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE partitions (stream_id INTEGER NOT NULL, partition INTEGER NOT NULL,
    next_offset INTEGER NOT NULL, PRIMARY KEY (stream_id, partition)) WITHOUT ROWID;
CREATE TABLE records (stream_id INTEGER NOT NULL, partition INTEGER NOT NULL,
    offset INTEGER NOT NULL, key BLOB, value BLOB, timestamp INTEGER NOT NULL, headers BLOB,
    PRIMARY KEY (stream_id, partition, offset)) WITHOUT ROWID;
CREATE TABLE checkpoints (job TEXT NOT NULL, task TEXT NOT NULL, checkpoint TEXT NOT NULL,
    PRIMARY KEY (job, task)) WITHOUT ROWID;
CREATE TABLE fences (job TEXT PRIMARY KEY, epoch INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE growth (stream_id INTEGER NOT NULL, partitions INTEGER NOT NULL,
    ends TEXT NOT NULL, grown_ms INTEGER NOT NULL, PRIMARY KEY (stream_id, partitions))
    WITHOUT ROWID;
CREATE TABLE leases (job TEXT PRIMARY KEY, token TEXT NOT NULL, holder TEXT NOT NULL,
    expires_ms INTEGER NOT NULL) WITHOUT ROWID;
PRAGMA user_version = 3;
"""

Row = tuple[int, bytes | None, bytes | None, int, tuple[tuple[str, bytes], ...]]


def old_records(partition: int, count: int) -> list[Row]:
    """A partition's records with gaps (a compacted changelog), None keys and values,
    headers on some, a timestamp each."""
    rows: list[Row] = []
    for n in range(count):
        key = None if n % 7 == 0 else b"k%d" % (n % 50)
        value = None if n % 11 == 0 else b"p%d-v%d" % (partition, n)
        headers = (("trace", b"%d" % n),) if n % 5 == 0 else ()
        rows.append((3 * n + (n % 2), key, value, 1_000 + n, headers))
    return rows


def write_v3_log(folder: Path, partitions: dict[int, int]) -> dict[int, list[Row]]:
    """A schema-3 file with stream ``events`` (records per partition) and a checkpoint."""
    folder.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(folder / "log.sqlite3", isolation_level=None)
    conn.executescript(OLD_SCHEMA)
    conn.execute("BEGIN")
    conn.execute("INSERT INTO streams VALUES ('events', 1, ?, 1)", (len(partitions),))
    written: dict[int, list[Row]] = {}
    for partition, count in partitions.items():
        rows = written[partition] = old_records(partition, count)
        conn.execute("INSERT INTO partitions VALUES (1, ?, ?)",
                     (partition, rows[-1][0] + 5 if rows else 0))
        conn.executemany("INSERT INTO records VALUES (1, ?, ?, ?, ?, ?, ?)", [
            (partition, o, k, v, t, encode_headers(h)) for o, k, v, t, h in rows])
    conn.execute("INSERT INTO checkpoints VALUES ('job', 't', ?)",
                 (checkpoint_to_json(Checkpoint("t", 1)),))
    conn.execute("COMMIT")
    conn.close()
    return written


async def read_all(system: LocalSystem, partitions: int) -> dict[int, list[Row]]:
    consumer = system.consumer()
    consumer.assign({SSP("local", "events", p): 0 for p in range(partitions)})
    got: dict[int, list[Row]] = {p: [] for p in range(partitions)}
    while batch := await consumer.fetch(max_records=333, timeout_ms=0):
        for ssp, records in batch.items():
            got[ssp.partition] += [(r.offset, r.key, r.value, r.timestamp, r.headers)
                                   for r in records]
    await consumer.close()
    return got


async def test_a_schema_3_log_is_migrated_in_place_keeping_every_record(
        tmp_path: Path) -> None:
    written = write_v3_log(tmp_path, {0: 2_500, 1: 0, 2: 1})

    system = LocalSystem("local", tmp_path)
    assert await read_all(system, 3) == written
    spans = await system.offsets("events")
    assert {p: (r.oldest, r.end) for p, r in spans.items()} == {
        0: (0, written[0][-1][0] + 5), 1: (0, 0), 2: (0, 5)}
    landed = await system.produce([ProducerRecord("events", b"new", b"after", partition=1)])
    assert (landed[0].partition, landed[0].offset) == (1, 0)
    assert (await system.read_columns("events", 0, 4, 10, 10)) == (
        [4, 6], [b"k1", b"k2"], [b"p0-v1", b"p0-v2"])
    assert await system.read_checkpoints("job") == {"t": Checkpoint("t", 1)}
    await system.close()

    conn = sqlite3.connect(tmp_path / "log.sqlite3")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5
    assert not has_records_table(conn)
    conn.close()


async def test_an_interrupted_migration_resumes_without_losing_or_repeating_a_record(
        tmp_path: Path) -> None:
    written = write_v3_log(tmp_path, {0: 1_200, 1: 700})
    conn = sqlite3.connect(tmp_path / "log.sqlite3", isolation_level=None)
    conn.executescript("CREATE TABLE batches (stream_id INTEGER NOT NULL, partition INTEGER "
                       "NOT NULL, base_offset INTEGER NOT NULL, last_offset INTEGER NOT NULL, "
                       "count INTEGER NOT NULL, payload BLOB NOT NULL, UNIQUE "
                       "(stream_id, partition, base_offset))")
    # Four transactions of at most 500 records, one partition at a time: partition 0
    # (500, 500, 200) and the first 500 of partition 1. Each transaction is atomic, so
    # this is where a SIGKILL between two of them leaves the file.
    assert not migrate_records(conn, SCHEMA_VERSION, chunk=500, transactions=4)
    left = dict(conn.execute("SELECT partition, count(*) FROM records GROUP BY partition"))
    moved = dict(conn.execute("SELECT partition, sum(count) FROM batches GROUP BY partition"))
    assert (left, moved) == ({1: 200}, {0: 1_200, 1: 500})
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 3
    conn.close()

    connect(tmp_path, LocalOptions()).close()  # any process's open finishes the job
    system = LocalSystem("local", tmp_path)
    assert await read_all(system, 2) == written
    await system.close()
