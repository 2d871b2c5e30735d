"""The local log's operations on one SQLite connection (synchronous; `LocalSystem` wraps it).

Every write is one ``BEGIN IMMEDIATE`` transaction, so concurrent writers in other
processes queue on SQLite's write lock (up to ``busy_timeout_ms``) and a transaction
is all-or-nothing even when its process is SIGKILLed mid-way.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from operator import itemgetter
from pathlib import Path

from framework.errors import (
    FencedError,
    JobModelError,
    SampanError,
    StreamNotFoundError,
    SystemUnavailableError,
    UnsupportedOperation,
)
from framework.frozen import fast_constructor
from framework.systems.base import (
    Checkpoint,
    GrowthHistory,
    OffsetRange,
    OutputColumns,
    ProducerRow,
    RecordPosition,
    fence_message,
)
from framework.systems.checkpoint_json import checkpoint_from_json, checkpoint_to_json
from framework.systems.local.batch import (
    BatchRow,
    batch_rows,
    decode_headers,
    encode_headers,
)
from framework.systems.local.schema import LocalOptions, connect, damaged_log, database_file
from framework.systems.placement import Placement

__all__ = ["INSERT_BATCH", "LocalLog", "decode_headers", "encode_headers"]

INSERT_BATCH = "INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?)"
_SET_NEXT = "UPDATE partitions SET next_offset = ? WHERE stream_id = ? AND partition = ?"
_NEXT_OFFSET = "SELECT next_offset FROM partitions WHERE stream_id = ? AND partition = ?"
_UPSERT_CHECKPOINT = (
    "INSERT INTO checkpoints (job, task, checkpoint) VALUES (?, ?, ?) "
    "ON CONFLICT (job, task) DO UPDATE SET checkpoint = excluded.checkpoint"
)
_position = fast_constructor(RecordPosition)
_streams, _keys, _values = itemgetter(0), itemgetter(1), itemgetter(2)
_timestamps, _headers = itemgetter(4), itemgetter(5)


class LocalLog:
    """Streams, records, checkpoints, fences and coordinator leases in one SQLite file."""

    def __init__(self, system: str, path: Path, options: LocalOptions) -> None:
        self.system = system
        self.file = database_file(path)
        self.options = options
        self.conn = connect(path, options)
        self._stream_ids: dict[str, int] = {}  # ids never change: cache once seen
        self.placement = Placement(system)

    def close(self) -> None:
        self.conn.close()

    # -- transactions -----------------------------------------------------------------

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; waits for other writers up to ``busy_timeout_ms``."""
        with self.guard("write"):
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """One consistent snapshot for several reads."""
        with self.guard("read"):
            self.conn.execute("BEGIN")
            try:
                yield self.conn
            finally:
                if self.conn.in_transaction:
                    self.conn.execute("COMMIT")

    @contextmanager
    def guard(self, what: str) -> Iterator[None]:
        """Turn SQLite's errors into `SystemUnavailableError` naming the file and the fix."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            if not isinstance(exc, sqlite3.OperationalError) or "disk I/O" in str(exc):
                raise damaged_log(self.file, exc) from exc
            if "locked" in str(exc) or "busy" in str(exc):
                raise SystemUnavailableError(
                    f"local log {self.file}: another process held the database locked for "
                    f"more than {self.options.busy_timeout_ms} ms during a {what}; find the "
                    "stuck process (e.g. `fuser` on the file) or raise busy_timeout_ms"
                ) from exc
            raise SystemUnavailableError(f"local log {self.file}: {what} failed: {exc}") from exc
        except sqlite3.Error as exc:
            raise SystemUnavailableError(f"local log {self.file}: {what} failed: {exc}") from exc

    # -- streams ----------------------------------------------------------------------

    def missing(self, stream: str) -> StreamNotFoundError:
        return StreamNotFoundError(
            f"stream {stream!r} does not exist in system {self.system!r} (local log "
            f"{self.file}); create it with `sampan streams create {self.system}.{stream} "
            "--partitions N`"
        )

    def stream_row(self, stream: str) -> tuple[int, int, bool]:
        """``stream``'s (id, partition count, compacted); `StreamNotFoundError` if missing."""
        row = self.conn.execute(
            "SELECT id, partitions, compacted FROM streams WHERE name = ?", (stream,)
        ).fetchone()
        if row is None:
            raise self.missing(stream)
        self._stream_ids[stream] = row[0]
        return row[0], row[1], bool(row[2])

    def stream_id(self, stream: str) -> int | None:
        """The id of ``stream``, or None while it does not exist."""
        if stream not in self._stream_ids:
            row = self.conn.execute("SELECT id FROM streams WHERE name = ?", (stream,)).fetchone()
            if row is None:
                return None
            self._stream_ids[stream] = row[0]
        return self._stream_ids[stream]

    def growth_history(self, stream: str) -> GrowthHistory:
        """``stream``'s count, end offsets and every recorded growth, in one snapshot."""
        with self.read() as conn:
            stream_id, count, _ = self.stream_row(stream)
            ends = dict(conn.execute(
                "SELECT partition, next_offset FROM partitions WHERE stream_id = ?",
                (stream_id,)).fetchall())
            grown = {int(before): {int(p): int(e) for p, e in json.loads(row)}
                     for before, row in conn.execute(
                         "SELECT partitions, ends FROM growth WHERE stream_id = ?",
                         (stream_id,))}
        return GrowthHistory(count=count, ends=ends, grown=grown)

    def list_streams(self) -> dict[str, int]:
        with self.guard("list of streams"):
            rows = self.conn.execute("SELECT name, partitions FROM streams ORDER BY name")
            return dict(rows.fetchall())

    def partition_counts(self, streams: Sequence[str]) -> dict[str, int]:
        with self.read():
            return {stream: self.stream_row(stream)[1] for stream in streams}

    def create_stream(self, stream: str, partitions: int, compacted: bool, exist_ok: bool) -> None:
        if not stream or partitions < 1:
            raise SampanError(
                f"cannot create stream {stream!r} with {partitions} partitions: a stream needs "
                "a non-empty name and at least 1 partition"
            )
        with self.write() as conn:
            if conn.execute("SELECT 1 FROM streams WHERE name = ?", (stream,)).fetchone():
                if exist_ok:
                    return
                raise SampanError(
                    f"stream {stream!r} already exists in system {self.system!r}; pass "
                    "exist_ok=True to accept it, or use `expand_stream` to grow it"
                )
            (stream_id,) = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM streams").fetchone()
            conn.execute(
                "INSERT INTO streams (name, id, partitions, compacted) VALUES (?, ?, ?, ?)",
                (stream, stream_id, partitions, int(compacted)),
            )
            conn.executemany(
                "INSERT INTO partitions VALUES (?, ?, 0)",
                [(stream_id, p) for p in range(partitions)],
            )

    def expand_stream(self, stream: str, partitions: int) -> None:
        with self.write() as conn:
            stream_id, count, _ = self.stream_row(stream)
            if partitions < count:
                raise UnsupportedOperation(
                    f"cannot shrink stream {stream!r} from {count} to {partitions} partitions: "
                    "partition counts only grow (records would lose their partition)"
                )
            if partitions > count:  # where every partition ended when it had `count` of them
                ends = dict(conn.execute(
                    "SELECT partition, next_offset FROM partitions WHERE stream_id = ?",
                    (stream_id,)).fetchall())
                conn.execute(
                    "INSERT OR IGNORE INTO growth VALUES (?, ?, ?, ?)",
                    (stream_id, count, json.dumps(sorted(ends.items())),
                     int(time.time() * 1000)))
            conn.executemany(
                "INSERT INTO partitions VALUES (?, ?, 0)",
                [(stream_id, p) for p in range(count, partitions)],
            )
            conn.execute("UPDATE streams SET partitions = ? WHERE id = ?", (partitions, stream_id))

    def delete_streams(self, streams: Sequence[str]) -> None:
        """Drop ``streams`` — records, partitions, growth and retention records — in one
        transaction; a stream that does not exist is skipped."""
        with self.write() as conn:
            for stream in streams:
                row = conn.execute("SELECT id FROM streams WHERE name = ?", (stream,)).fetchone()
                self._stream_ids.pop(stream, None)
                if row is None:
                    continue
                for table in ("batches", "partitions", "growth"):
                    conn.execute(f"DELETE FROM {table} WHERE stream_id = ?", row)
                conn.execute("DELETE FROM retention_resets WHERE stream = ?", (stream,))
                conn.execute("DELETE FROM streams WHERE id = ?", row)

    def offsets(self, stream: str) -> dict[int, OffsetRange]:
        with self.read() as conn:
            stream_id = self.stream_row(stream)[0]
            rows = conn.execute(
                "SELECT p.partition, p.next_offset, (SELECT min(b.base_offset) FROM batches b "
                "WHERE b.stream_id = p.stream_id AND b.partition = p.partition) "
                "FROM partitions p WHERE p.stream_id = ? ORDER BY p.partition",
                (stream_id,),
            ).fetchall()
        return {p: OffsetRange(end if oldest is None else oldest, end) for p, end, oldest in rows}

    # -- records, checkpoints, fences -------------------------------------------------

    def append(
        self,
        rows: Sequence[ProducerRow],
        job: str | None = None,
        epoch: int | None = None,
        checkpoints: Sequence[Checkpoint] = (),
        wanted: int | None = None,
        columns: Sequence[OutputColumns] = (),
    ) -> list[RecordPosition]:
        """Write ``rows``, then ``columns`` (and, for a commit, check the fence and write
        checkpoints) in one transaction; returns where each row landed, in order (only
        the first ``wanted`` when given)."""
        with self.write() as conn:
            if job is not None and epoch is not None:
                self._check_fence(job, epoch)
            positions = self._insert(conn, rows, wanted) if rows else []
            if columns:
                self._insert_columns(conn, columns)
            if checkpoints:
                conn.executemany(
                    _UPSERT_CHECKPOINT,
                    [(job, cp.task, checkpoint_to_json(cp)) for cp in checkpoints],
                )
        return positions

    def _insert(
        self, conn: sqlite3.Connection, rows: Sequence[ProducerRow],
        wanted: int | None = None,
    ) -> list[RecordPosition]:
        # Counts are read inside the write transaction: a produce racing an expansion
        # sees either the old count or the new one, never a mix.
        streams = {name: self.stream_row(name)[:2] for name in set(map(_streams, rows))}
        slots: dict[tuple[int, int], list[ProducerRow]] = {}
        bases: dict[tuple[int, int], int] = {}
        positions = []
        wanted = len(rows) if wanted is None else wanted
        last: str | None = None
        stream_id = count = 0
        memo: dict[bytes, int] = {}
        memos: dict[str, dict[bytes, int]] = {}
        place = self.placement.row_partition
        for index, row in enumerate(rows):
            stream = row[0]
            if stream != last:
                stream_id, count = streams[stream]
                memo = memos.setdefault(stream, {})
                last = stream
            partition = place(row, count, memo)  # raises naming the stream
            slot = (stream_id, partition)
            batch = slots.get(slot)
            if batch is None:
                batch = slots[slot] = []
                bases[slot] = conn.execute(_NEXT_OFFSET, slot).fetchone()[0]
            if index < wanted:
                positions.append(_position(stream, partition, bases[slot] + len(batch)))
            batch.append(row)
        now = int(time.time() * 1000)
        written = []
        for (stream_id, partition), batch in slots.items():
            base = bases[(stream_id, partition)]
            timestamps = list(map(_timestamps, batch))
            if None in timestamps:
                timestamps = [now if t is None else t for t in timestamps]
            headers = list(map(_headers, batch))
            written += batch_rows(
                stream_id, partition, range(base, base + len(batch)),
                list(map(_keys, batch)), list(map(_values, batch)), timestamps,
                [encode_headers(h) for h in headers] if any(headers) else None)
        conn.executemany(INSERT_BATCH, written)
        conn.executemany(_SET_NEXT, [(bases[slot] + len(batch), *slot)
                                     for slot, batch in slots.items()])
        return positions

    def _insert_columns(self, conn: sqlite3.Connection,
                        columns: Sequence[OutputColumns]) -> None:
        """Append `OutputColumns` (after any rows of the same transaction): placed per
        partition by `Placement.group`, each partition's run packed straight into
        batches; no tuple per record, no position returned."""
        now = int(time.time() * 1000)
        written: list[BatchRow] = []
        ends: dict[tuple[int, int], int] = {}
        for output in columns:
            stream_id, count = self.stream_row(output.stream)[:2]
            for partition, bucket in enumerate(self.placement.group(output, count)):
                if not bucket:
                    continue
                slot = (stream_id, partition)
                base = ends.get(slot)
                if base is None:
                    base = conn.execute(_NEXT_OFFSET, slot).fetchone()[0]
                size = len(bucket) >> 1
                written += batch_rows(stream_id, partition, range(base, base + size),
                                      bucket[0::2], bucket[1::2], [now] * size)
                ends[slot] = base + size
        conn.executemany(INSERT_BATCH, written)
        conn.executemany(_SET_NEXT, [(end, *slot) for slot, end in ends.items()])

    def _check_fence(self, job: str, epoch: int) -> None:
        row = self.conn.execute("SELECT epoch FROM fences WHERE job = ?", (job,)).fetchone()
        if row is not None and row[0] != epoch:
            raise FencedError(fence_message(job, epoch, row[0]))

    def check_fence(self, job: str, epoch: int) -> None:
        """Raise `FencedError` unless ``epoch`` is the job's current (fenced) epoch."""
        with self.read():
            self._check_fence(job, epoch)

    def fenced_epoch(self, job: str) -> int | None:
        """The job's current epoch, or None before its first job model."""
        with self.guard("read of the fence"):
            row = self.conn.execute("SELECT epoch FROM fences WHERE job = ?", (job,)).fetchone()
        return None if row is None else int(row[0])

    def acquire_lease(self, job: str, token: str, holder: str, ttl_ms: int, now_ms: int,
                      replacing: str | None = None) -> tuple[str, str, int] | None:
        """Take or renew ``job``'s lease for ``token``; None on success, else the current
        ``(token, holder, expires_ms)``. A lease held by another token is taken only once
        it expired, or when it is still ``replacing`` (the caller found its holder dead)."""
        with self.write() as conn:
            row = conn.execute("SELECT token, holder, expires_ms FROM leases WHERE job = ?",
                               (job,)).fetchone()
            if row is not None and row[0] != token and row[2] > now_ms and row[0] != replacing:
                return str(row[0]), str(row[1]), int(row[2])
            conn.execute(
                "INSERT INTO leases (job, token, holder, expires_ms) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (job) DO UPDATE SET token = excluded.token, holder = "
                "excluded.holder, expires_ms = excluded.expires_ms",
                (job, token, holder, now_ms + ttl_ms))
        return None

    def read_lease(self, job: str) -> tuple[str, int] | None:
        """``job``'s lease as ``(holder, expires_ms)``; None when nobody holds it."""
        with self.guard("read of the lease"):
            row = self.conn.execute("SELECT holder, expires_ms FROM leases WHERE job = ?",
                                    (job,)).fetchone()
        return None if row is None else (str(row[0]), int(row[1]))

    def leases(self) -> dict[str, tuple[str, int]]:
        """Every job's lease as ``job → (holder, expires_ms)``, expired ones included."""
        with self.guard("read of the leases"):
            rows = self.conn.execute("SELECT job, holder, expires_ms FROM leases ORDER BY job")
            return {str(job): (str(holder), int(expires)) for job, holder, expires in rows}

    def release_lease(self, job: str, token: str) -> None:
        """Give the lease up (a clean stop), if ``token`` still holds it."""
        with self.write() as conn:
            conn.execute("DELETE FROM leases WHERE job = ? AND token = ?", (job, token))

    def read_checkpoints(self, job: str) -> dict[str, Checkpoint]:
        with self.guard("read of checkpoints"):
            rows = self.conn.execute(
                "SELECT task, checkpoint FROM checkpoints WHERE job = ? ORDER BY task", (job,)
            ).fetchall()
        return {task: checkpoint_from_json(text) for task, text in rows}

    def fence(self, job: str, epoch: int) -> None:
        with self.write() as conn:
            conn.execute(
                "INSERT INTO fences (job, epoch) VALUES (?, ?) ON CONFLICT (job) "
                "DO UPDATE SET epoch = max(epoch, excluded.epoch)",
                (job, epoch),
            )

    def advance_fence(self, job: str, epoch: int) -> None:
        """Make ``epoch`` current, refusing one not above the current epoch: two publishers
        can never both make the same epoch current (`JobModelError` names both)."""
        with self.write() as conn:
            row = conn.execute("SELECT epoch FROM fences WHERE job = ?", (job,)).fetchone()
            if row is not None and row[0] >= epoch:
                raise JobModelError(
                    f"job {job!r}: cannot publish epoch {epoch}, epoch {row[0]} is already "
                    f"current; another coordinator is running this job — stop it first")
            conn.execute("INSERT INTO fences (job, epoch) VALUES (?, ?) ON CONFLICT (job) "
                         "DO UPDATE SET epoch = excluded.epoch", (job, epoch))
