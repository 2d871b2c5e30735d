"""Finding records of the local log by time: where a job whose start position is a time
(`framework.config.StartPosition`) starts reading each partition."""

from __future__ import annotations

import sqlite3

from framework.systems.local.batch import TIMES_PREFIX, first_offset_at
from framework.systems.local.log import LocalLog

__all__ = ["offsets_for_time"]

# Only the head, offsets and timestamps of each batch are read, never its keys and values.
_TIMES = ("SELECT substr(payload, 1, ?) FROM batches WHERE stream_id = ? AND partition = ? "
          "ORDER BY base_offset")


def offsets_for_time(log: LocalLog, stream: str, timestamp_ms: int) -> dict[int, int]:
    """Per partition of ``stream``, the offset of its first retained record stamped at or
    after ``timestamp_ms``, or its end when none is (as Kafka's ListOffsets by time)."""
    with log.read() as conn:
        stream_id, count, _ = log.stream_row(stream)
        ends = dict(conn.execute("SELECT partition, next_offset FROM partitions WHERE "
                                 "stream_id = ?", (stream_id,)).fetchall())
        return {p: _first_at(conn, stream_id, p, timestamp_ms, ends[p]) for p in range(count)}


def _first_at(conn: sqlite3.Connection, stream_id: int, partition: int, timestamp_ms: int,
              end: int) -> int:
    # Batches in offset order, each judged on its own: producers' timestamps need not grow.
    for (times,) in conn.execute(_TIMES, (TIMES_PREFIX, stream_id, partition)):
        found = first_offset_at(times, timestamp_ms)
        if found is not None:
            return found
    return end
