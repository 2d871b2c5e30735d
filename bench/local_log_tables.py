"""The local log's ``batches`` table: WITHOUT ROWID against a rowid table, and against
schema 3's row per record.

Each layout gets the same commits (``--partitions`` partitions, ``--per-commit`` records
per partition per commit, 16-byte keys and ~24-byte values, one transaction per commit,
WAL, synchronous NORMAL, 8 KiB pages, as `framework.systems.local.schema` sets them), then
every partition is read back from the start in range scans of 1,000 records. Printed: µs
of wall time per record for writing and for reading, and the file size.

- ``without rowid``: ``batches`` clustered on (stream_id, partition, base_offset);
- ``rowid + unique``: a rowid table with that key as a UNIQUE index (two b-trees);
- ``row per record``: schema 3's ``records`` table, one row per record.

Run: ``.venv/bin/python -m bench.local_log_tables [--records N] [--per-commit N]``.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from framework.systems.local.batch import batch_rows, decode_range

BATCHES = """CREATE TABLE batches (stream_id INTEGER NOT NULL, partition INTEGER NOT NULL,
    base_offset INTEGER NOT NULL, last_offset INTEGER NOT NULL, count INTEGER NOT NULL,
    payload BLOB NOT NULL, PRIMARY KEY (stream_id, partition, base_offset)) WITHOUT ROWID"""
ROWID_TABLE = """CREATE TABLE batches (stream_id INTEGER NOT NULL, partition INTEGER NOT NULL,
    base_offset INTEGER NOT NULL, last_offset INTEGER NOT NULL, count INTEGER NOT NULL,
    payload BLOB NOT NULL)"""
ROWID_INDEX = "CREATE UNIQUE INDEX batches_key ON batches (stream_id, partition, base_offset)"
RECORDS = """CREATE TABLE records (stream_id INTEGER NOT NULL, partition INTEGER NOT NULL,
    offset INTEGER NOT NULL, key BLOB, value BLOB, timestamp INTEGER NOT NULL, headers BLOB,
    PRIMARY KEY (stream_id, partition, offset)) WITHOUT ROWID"""
RANGE = ("SELECT payload FROM batches WHERE stream_id = ?1 AND partition = ?2 AND "
         "base_offset >= coalesce((SELECT max(base_offset) FROM batches WHERE stream_id = ?1 "
         "AND partition = ?2 AND base_offset <= ?3), ?3) ORDER BY base_offset")


def _open(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA page_size = 8192")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def run(layout: str, folder: Path, records: int, partitions: int, per_commit: int
        ) -> tuple[float, float, int]:
    """(write µs/record, read µs/record, file bytes) of one layout."""
    path = folder / f"{layout.replace(' ', '-')}.sqlite3"
    conn = _open(path)
    if layout == "row per record":
        conn.execute(RECORDS)
    elif layout == "without rowid":
        conn.execute(BATCHES)
    else:
        conn.execute(ROWID_TABLE)
        conn.execute(ROWID_INDEX)
    keys = [b"key-%011d" % (n % 10_000) for n in range(per_commit)]
    values = [b'{"sum": %d, "n": %d}' % (n, n % 97) for n in range(per_commit)]
    stamps = [1_700_000_000_000] * per_commit
    commits = records // (partitions * per_commit)
    started = time.perf_counter()
    for commit in range(commits):
        base = commit * per_commit
        conn.execute("BEGIN IMMEDIATE")
        for partition in range(partitions):
            if layout == "row per record":
                conn.executemany("INSERT INTO records VALUES (1, ?, ?, ?, ?, ?, NULL)", [
                    (partition, base + n, keys[n], values[n], stamps[n])
                    for n in range(per_commit)])
            else:
                conn.executemany("INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?)", batch_rows(
                    1, partition, range(base, base + per_commit), keys, values, stamps))
        conn.execute("COMMIT")
    written = time.perf_counter() - started
    total = commits * partitions * per_commit
    started = time.perf_counter()
    read = 0
    for partition in range(partitions):
        position, end = 0, commits * per_commit
        while position < end:
            if layout == "row per record":
                rows = conn.execute(
                    "SELECT offset, key, value, timestamp, headers FROM records WHERE "
                    "stream_id = 1 AND partition = ? AND offset >= ? ORDER BY offset LIMIT 1000",
                    (partition, position)).fetchall()
                offsets = [row[0] for row in rows]
            else:
                offsets = []
                cursor = conn.execute(RANGE, (1, partition, position))
                for (payload,) in cursor:
                    offsets += decode_range(payload, position, end, 1000 - len(offsets))[0]
                    if len(offsets) >= 1000:
                        break
                cursor.close()
            read += len(offsets)
            position = offsets[-1] + 1
    assert read == total
    scanned = time.perf_counter() - started
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return written / total * 1e6, scanned / total * 1e6, path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--per-commit", type=int, default=250,
                        help="records per partition per commit")
    args = parser.parse_args()
    print(f"{args.records:,} records, {args.partitions} partitions, {args.per_commit} records "
          "per partition per commit")
    print(f"{'layout':<16} {'write us/rec':>12} {'read us/rec':>12} {'file MiB':>9}")
    with tempfile.TemporaryDirectory(prefix="sampan-bench-tables-") as tmp:
        for layout in ("without rowid", "rowid + unique", "row per record"):
            write, read, size = run(layout, Path(tmp), args.records, args.partitions,
                                    args.per_commit)
            print(f"{layout:<16} {write:>12.2f} {read:>12.2f} {size / 2**20:>9.1f}")


if __name__ == "__main__":
    main()
