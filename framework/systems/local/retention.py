"""Retention of the local log's non-compacted streams: whole batches past ``retention_ms``
or ``retention_bytes`` are deleted, oldest first, and the freed pages go back to the
file system.

Safe by default (``wait-for-readers``): a batch goes only once every job reading the
stream has committed past it. A stream's readers are the jobs with checkpoints on it in
this log — a job has them from its first job model on, at the positions it starts from
(`framework.coordinator.starts`), before its first commit too; a job with checkpoints on
some partitions of the stream but not on this one (a partition added by an expansion it
has not reached) reads it from offset 0. With
``drop-unread`` the stream stays bounded whatever its readers do: a reader behind the
new oldest offset has its checkpoint moved there and a `RetentionReset` row recorded in
the same transaction, which `sampan status` shows — never a silent skip.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field, replace

from framework.systems.checkpoint_json import checkpoint_from_json, checkpoint_to_json
from framework.systems.local.batch import newest_timestamp
from framework.systems.local.log import LocalLog

__all__ = [
    "KEPT_RESETS",
    "RETENTION_MODES",
    "RetentionPolicy",
    "RetentionReset",
    "RetentionResult",
    "apply_retention",
    "partition_bytes",
    "read_resets",
    "release_free_pages",
]

RETENTION_MODES = ("wait-for-readers", "drop-unread")
"""``wait-for-readers`` (default): keep what a reading job has not committed past;
``drop-unread``: delete past retention regardless, resetting lagging readers."""

KEPT_RESETS = 100
"""`RetentionReset` rows kept per job (the newest): a reader lagging for ever under
``drop-unread`` adds one per pass."""
_TRIM_RESETS = (
    "DELETE FROM retention_resets WHERE job = ?1 AND (reset_ms, stream, partition, task) < "
    "(SELECT reset_ms, stream, partition, task FROM retention_resets WHERE job = ?2 ORDER BY "
    "reset_ms DESC, stream DESC, partition DESC, task DESC LIMIT 1 OFFSET ?3 - 1)")

_UNKNOWN_TASK = ""
"""The task of a reader that has no checkpoint on the partition yet."""


@dataclass(frozen=True)
class RetentionPolicy:
    """The retention in force for one stream (None: no limit of that kind)."""

    retention_ms: int | None = None
    """Delete batches whose newest record timestamp is older than this."""
    retention_bytes: int | None = None
    """Keep at most this many payload bytes per partition (whole batches, oldest go)."""
    mode: str = "wait-for-readers"
    """One of `RETENTION_MODES`."""

    @property
    def active(self) -> bool:
        """Whether anything is ever deleted under this policy."""
        return self.retention_ms is not None or self.retention_bytes is not None

    def describe(self) -> str:
        """``"7d, 1 GiB/partition, wait-for-readers"`` or ``"forever"``, for listings."""
        if not self.active:
            return "forever"
        parts = []
        if self.retention_ms is not None:
            parts.append(_duration(self.retention_ms))
        if self.retention_bytes is not None:
            parts.append(f"{_size(self.retention_bytes)}/partition")
        return ", ".join([*parts, self.mode])


@dataclass(frozen=True)
class RetentionReset:
    """A reader moved forward by ``drop-unread`` retention: the records of
    ``[from_offset, to_offset)`` were deleted before ``job``'s ``task`` committed them."""

    job: str
    task: str
    stream: str
    partition: int
    from_offset: int
    to_offset: int
    reset_ms: int

    def describe(self) -> str:
        """One line for `sampan status` and logs."""
        who = f"task {self.task!r}" if self.task else "a task that had not read it yet"
        return (f"{self.stream} partition {self.partition}: offsets {self.from_offset}–"
                f"{self.to_offset - 1} deleted by retention (retention_mode = "
                f"\"drop-unread\") before {who} committed them; it continues at "
                f"{self.to_offset}")


@dataclass
class RetentionResult:
    """What one pass over a stream did."""

    batches: int = 0
    records: int = 0
    bytes: int = 0
    resets: list[RetentionReset] = field(default_factory=list)
    waiting_for: set[tuple[str, str, int]] = field(default_factory=set)
    """(job, task, partition) readers that kept batches past retention
    (``wait-for-readers``)."""


def apply_retention(log: LocalLog, stream: str, policy: RetentionPolicy,
                    now_ms: int | None = None, chunk: int = 500) -> RetentionResult:
    """Delete the batches of every partition of ``stream`` past ``policy``, oldest first,
    at most ``chunk`` batches per write transaction (workers' commits wait little)."""
    result = RetentionResult()
    if not policy.active:
        return result
    now = int(time.time() * 1000) if now_ms is None else now_ms
    with log.read():
        stream_id, count, compacted = log.stream_row(stream)
    if compacted:  # compaction bounds these; their records are a store's state
        return result
    for partition in range(count):
        while _pass(log, stream_id, stream, partition, policy, now, chunk, result):
            pass
    return result


def _pass(log: LocalLog, stream_id: int, stream: str, partition: int,
          policy: RetentionPolicy, now: int, chunk: int, result: RetentionResult) -> bool:
    """One write transaction over one partition; True when there may be more to delete."""
    with log.write() as conn:
        rows = conn.execute(
            "SELECT base_offset, last_offset, count, length(payload) FROM batches WHERE "
            "stream_id = ? AND partition = ? ORDER BY base_offset",
            (stream_id, partition)).fetchall()
        readers = _readers(conn, stream, partition)
        limit = min(readers.values(), default=None)
        floor = _barrier_floor(conn, stream_id, partition, readers)
        remaining = sum(row[3] for row in rows)
        gone = 0
        for base, last, records, size in rows:
            if gone == chunk or not _expired(conn, policy, now, remaining, stream_id,
                                             partition, base):
                break
            if policy.mode != "drop-unread" and limit is not None and last >= limit:
                result.waiting_for.update((job, task, partition) for (job, task), offset
                                          in readers.items() if offset <= last)
                break
            if floor is not None and last >= floor:
                break
            gone += 1
            remaining -= size
            result.records += records
            result.bytes += size
        if not gone:
            return False
        result.batches += gone
        conn.execute("DELETE FROM batches WHERE stream_id = ? AND partition = ? AND "
                     "base_offset <= ?", (stream_id, partition, rows[gone - 1][0]))
        if gone < len(rows):
            oldest = rows[gone][0]
        else:
            oldest = conn.execute("SELECT next_offset FROM partitions WHERE stream_id = ? "
                                  "AND partition = ?", (stream_id, partition)).fetchone()[0]
        if policy.mode == "drop-unread":
            result.resets += _reset(conn, stream, partition, readers, oldest, now)
    return gone == chunk


def _expired(conn: sqlite3.Connection, policy: RetentionPolicy, now: int, remaining: int,
             stream_id: int, partition: int, base: int) -> bool:
    """Whether the batch at ``base`` is past retention, ``remaining`` payload bytes
    being in its partition from it on."""
    if policy.retention_bytes is not None and remaining > policy.retention_bytes:
        return True
    if policy.retention_ms is None:
        return False
    (payload,) = conn.execute(
        "SELECT payload FROM batches WHERE stream_id = ? AND partition = ? AND "
        "base_offset = ?", (stream_id, partition, base)).fetchone()
    return newest_timestamp(payload) + policy.retention_ms <= now


def _barrier_floor(conn: sqlite3.Connection, stream_id: int, partition: int,
                   readers: dict[tuple[str, str], int]) -> int | None:
    """The last offset below an expansion's recorded end of ``partition`` that a reader
    has not passed yet: its batch stays, so that reader can still reach the end where its
    expansion barrier (or the count it expects) stops it, even under ``drop-unread``."""
    pending = [end for (row,) in conn.execute(
                   "SELECT ends FROM growth WHERE stream_id = ?", (stream_id,))
               for p, end in json.loads(row)
               if int(p) == partition and end > 0 and any(o < end for o in readers.values())]
    return min(pending) - 1 if pending else None


def _readers(conn: sqlite3.Connection, stream: str, partition: int
             ) -> dict[tuple[str, str], int]:
    """(job, task) → committed offset of every reader of ``stream``'s ``partition``."""
    readers: dict[tuple[str, str], int] = {}
    jobs: set[str] = set()
    for job, task, text in conn.execute("SELECT job, task, checkpoint FROM checkpoints"):
        for ssp, offset in checkpoint_from_json(text).inputs.items():
            if ssp.stream != stream:
                continue
            jobs.add(job)
            if ssp.partition == partition:
                key = (job, task)
                readers[key] = min(offset, readers.get(key, offset))
    for job in jobs - {job for job, _ in readers}:
        readers[(job, _UNKNOWN_TASK)] = 0
    return readers


def _reset(conn: sqlite3.Connection, stream: str, partition: int,
           readers: dict[tuple[str, str], int], oldest: int, now: int
           ) -> list[RetentionReset]:
    """Move every reader behind ``oldest`` to it, recording each move."""
    resets = []
    for (job, task), offset in sorted(readers.items()):
        if offset >= oldest:
            continue
        reset = RetentionReset(job, task, stream, partition, offset, oldest, now)
        resets.append(reset)
        conn.execute("INSERT OR REPLACE INTO retention_resets VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (job, task, stream, partition, offset, oldest, now))
        conn.execute(_TRIM_RESETS, (job, job, KEPT_RESETS))
        if task == _UNKNOWN_TASK:
            continue
        (text,) = conn.execute("SELECT checkpoint FROM checkpoints WHERE job = ? AND "
                               "task = ?", (job, task)).fetchone()
        checkpoint = checkpoint_from_json(text)
        inputs = {ssp: (oldest if ssp.stream == stream and ssp.partition == partition
                        and position < oldest else position)
                  for ssp, position in checkpoint.inputs.items()}
        conn.execute("UPDATE checkpoints SET checkpoint = ? WHERE job = ? AND task = ?",
                     (checkpoint_to_json(replace(checkpoint, inputs=inputs)), job, task))
    return resets


def read_resets(log: LocalLog, job: str) -> list[RetentionReset]:
    """Every `RetentionReset` of ``job``'s readers, oldest first."""
    with log.guard("read of retention resets"):
        rows = log.conn.execute(
            "SELECT job, task, stream, partition, from_offset, to_offset, reset_ms FROM "
            "retention_resets WHERE job = ? ORDER BY reset_ms, stream, partition, task",
            (job,)).fetchall()
    return [RetentionReset(*row) for row in rows]


def partition_bytes(log: LocalLog, stream: str) -> dict[int, int]:
    """Payload bytes on disk per partition of ``stream`` (its batches' blobs)."""
    with log.read() as conn:
        stream_id, count, _ = log.stream_row(stream)
        sizes = dict(conn.execute(
            "SELECT partition, sum(length(payload)) FROM batches WHERE stream_id = ? "
            "GROUP BY partition", (stream_id,)).fetchall())
    return {p: int(sizes.get(p) or 0) for p in range(count)}


def release_free_pages(log: LocalLog, pages: int = 4096) -> int:
    """Hand the file's free pages back to the file system (incremental vacuum),
    ``pages`` per write transaction; how many went. The database file shrinks when the
    WAL is next checkpointed into it."""
    released = 0
    while True:
        with log.guard("release of free pages"):
            free: int = log.conn.execute("PRAGMA freelist_count").fetchone()[0]
            if not free:
                return released
            # executescript steps the pragma to completion (execute frees one page).
            log.conn.executescript(f"PRAGMA incremental_vacuum({int(pages)});")
            after: int = log.conn.execute("PRAGMA freelist_count").fetchone()[0]
        if after >= free:  # not an incremental-vacuum file, or nothing could move
            return released
        released += free - after


def _duration(ms: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _size(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"
