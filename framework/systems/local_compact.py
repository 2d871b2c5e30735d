"""Compaction of the local log's compacted streams (changelogs, metadata): the latest
record per key stays, so the offsets inside a batch become non-contiguous."""

from __future__ import annotations

import sqlite3

from framework.errors import UnsupportedOperation
from framework.systems.local_batch import batch_rows, decode_keys, decode_range, encode_headers
from framework.systems.local_log import INSERT_BATCH, LocalLog

__all__ = ["compact_partition"]


def compact_partition(log: LocalLog, stream: str, partition: int, chunk: int = 5000) -> int:
    """Drop every record of one partition superseded by a later one with its key.

    The latest record per key stays, tombstones (value None) included; records
    without a key are never dropped. What to drop is found in a read transaction (no
    write lock: committing workers go on); then each batch holding such records is
    rewritten without them (or deleted when none is left), in short write
    transactions of about ``chunk`` records — safe, because later writes only add
    newer batches, and a batch is re-read and filtered inside the write.
    """
    with log.read() as conn:
        stream_id, _, compacted = log._stream(stream)
        if not compacted:
            raise UnsupportedOperation(
                f"cannot compact stream {stream!r}: it was not created compacted; only "
                "changelog and metadata streams are compacted"
            )
        scan = ("SELECT base_offset, payload FROM batches WHERE stream_id = ? AND "
                "partition = ? ORDER BY base_offset")
        latest: dict[bytes | None, int] = {}
        for _, payload in conn.execute(scan, (stream_id, partition)):
            offsets, keys = decode_keys(payload)
            latest.update(zip(keys, offsets, strict=True))
        latest.pop(None, None)
        superseded: dict[int, set[int]] = {}  # batch base offset -> offsets to drop
        for base, payload in conn.execute(scan, (stream_id, partition)):
            offsets, keys = decode_keys(payload)
            drop = {offset for offset, key in zip(offsets, keys, strict=True)
                    if key is not None and latest[key] != offset}
            if drop:
                superseded[base] = drop
    dropped, work = 0, list(superseded.items())
    while work:
        with log.write() as conn:
            taken = 0
            while work and taken < chunk:
                base, drop = work.pop(0)
                taken += len(drop)
                dropped += _rewrite(conn, stream_id, partition, base, drop)
    return dropped

def _rewrite(conn: sqlite3.Connection, stream_id: int, partition: int, base: int,
             drop: set[int]) -> int:
    """Rewrite one batch without the records at offsets in ``drop``; how many went."""
    row = conn.execute(
        "SELECT payload FROM batches WHERE stream_id = ? AND partition = ? AND "
        "base_offset = ?", (stream_id, partition, base)).fetchone()
    if row is None:  # rewritten by a compaction in another process meanwhile
        return 0
    offsets, keys, values, timestamps, headers = decode_range(
        row[0], -1 << 62, 1 << 62, 1 << 62)
    keep = [i for i, offset in enumerate(offsets) if offset not in drop]
    conn.execute("DELETE FROM batches WHERE stream_id = ? AND partition = ? AND "
                 "base_offset = ?", (stream_id, partition, base))
    if keep:
        encoded = [encode_headers(headers[i]) for i in keep] if any(headers) else None
        conn.executemany(INSERT_BATCH, batch_rows(
            stream_id, partition, [offsets[i] for i in keep], [keys[i] for i in keep],
            [values[i] for i in keep], [timestamps[i] for i in keep], encoded))
    return len(offsets) - len(keep)
