"""Compaction of the local log's compacted streams (changelogs, metadata): the latest
record per key stays, so the offsets inside a batch become non-contiguous."""

from __future__ import annotations

import sqlite3

from framework.errors import UnsupportedOperation
from framework.systems.local.batch import (
    MAX_BATCH_RECORDS,
    BatchColumns,
    batch_rows,
    decode_keys,
    decode_range,
    encode_headers,
)
from framework.systems.local.log import INSERT_BATCH, LocalLog

__all__ = ["compact_partition"]


def compact_partition(log: LocalLog, stream: str, partition: int, chunk: int = 5000) -> int:
    """Drop every record of one partition superseded by a later one with its key.

    The latest record per key stays, tombstones (value None) included; records without
    a key are never dropped. What to drop is found in a read transaction (no write
    lock: committing workers go on). Then each run of adjacent batches holding such
    records is rewritten as one batch without them (up to `MAX_BATCH_RECORDS` kept
    records a run, so compaction also merges the small batches left of many commits),
    in short write transactions of about ``chunk`` dropped records. Safe: later writes
    only add newer batches, and a run is re-read and filtered inside the write.
    """
    with log.read() as conn:
        stream_id, _, compacted = log.stream_row(stream)
        if not compacted:
            raise UnsupportedOperation(
                f"cannot compact stream {stream!r}: it was not created compacted; only "
                "changelog and metadata streams are compacted"
            )
        latest: dict[bytes | None, int] = {}
        for _, payload in conn.execute(_SCAN, (stream_id, partition)):
            offsets, keys = decode_keys(payload)
            latest.update(zip(keys, offsets, strict=True))
        latest.pop(None, None)
        runs: list[_Run] = []  # (first base, last base, offsets to drop, records kept)
        adjacent = False
        for base, payload in conn.execute(_SCAN, (stream_id, partition)):
            offsets, keys = decode_keys(payload)
            drop = {offset for offset, key in zip(offsets, keys, strict=True)
                    if key is not None and latest[key] != offset}
            kept = len(offsets) - len(drop)
            if drop and adjacent and runs[-1][3] + kept <= MAX_BATCH_RECORDS:
                run = runs[-1]
                run[2].update(drop)
                runs[-1] = (run[0], base, run[2], run[3] + kept)
            elif drop:
                runs.append((base, base, drop, kept))
            adjacent = bool(drop)
    dropped = 0
    while runs:
        with log.write() as conn:
            taken = 0
            while runs and taken < chunk:
                run = runs.pop(0)
                taken += len(run[2])
                dropped += _rewrite(conn, stream_id, partition, run)
    return dropped


_SCAN = ("SELECT base_offset, payload FROM batches WHERE stream_id = ? AND partition = ? "
         "ORDER BY base_offset")
_Run = tuple[int, int, set[int], int]


def _rewrite(conn: sqlite3.Connection, stream_id: int, partition: int, run: _Run) -> int:
    """Rewrite the batches starting in ``[run[0], run[1]]`` as one (or none) without the
    records at the offsets in ``run[2]``; how many records went. Whatever batches are in
    that range now (another process's compaction may have rewritten some) are read, so
    the new batch never overlaps one left outside."""
    first, last, drop, _ = run
    columns: BatchColumns = ([], [], [], [], [])
    offsets, keys, values, timestamps, headers = columns
    for (payload,) in conn.execute(
            "SELECT payload FROM batches WHERE stream_id = ? AND partition = ? AND "
            "base_offset BETWEEN ? AND ? ORDER BY base_offset",
            (stream_id, partition, first, last)).fetchall():
        more = decode_range(payload, -1 << 62, 1 << 62, 1 << 62)
        offsets += more[0]
        keys += more[1]
        values += more[2]
        timestamps += more[3]
        headers += more[4]
    keep = [i for i, offset in enumerate(offsets) if offset not in drop]
    conn.execute("DELETE FROM batches WHERE stream_id = ? AND partition = ? AND "
                 "base_offset BETWEEN ? AND ?", (stream_id, partition, first, last))
    if keep:
        encoded = [encode_headers(headers[i]) for i in keep] if any(headers) else None
        conn.executemany(INSERT_BATCH, batch_rows(
            stream_id, partition, [offsets[i] for i in keep], [keys[i] for i in keep],
            [values[i] for i in keep], [timestamps[i] for i in keep], encoded))
    return len(offsets) - len(keep)
