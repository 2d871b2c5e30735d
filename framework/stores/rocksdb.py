"""RocksDB `StoreEngine` (rocksdict, raw mode): one database per (store, task).

Layout: ``<root>/stores/<store>/<task>`` (the worker's root is the job's
``<data_dir>/<job name>``), names percent-encoded so any task name
(``"SystemStreamPartition [local, clicks, 3]"``) is one safe, distinct directory.

The changelog position lives in its own column family, ``sampan``, and is written in
the same `WriteBatch` as the data. A column family rather than a reserved key prefix
because user keys are arbitrary bytes: no prefix is impossible for them to use, and
prefixing every user key instead would cost bytes and a copy per record. RocksDB
applies a multi-column-family batch atomically (one WAL entry), so after a crash the
data and the position are always from the same batch.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import cast
from urllib.parse import quote

from rocksdict import (
    BlockBasedOptions,
    Cache,
    ColumnFamily,
    DbClosedError,
    DBCompressionType,
    MemtableFactory,
    Options,
    Rdict,
    ReadOptions,
    WriteBatch,
    WriteBufferManager,
)

from framework.errors import StoreCorruptedError, StoreError, StoreLockedError
from framework.stores.base import ChangelogPosition

__all__ = ["RocksDBEngine", "RocksDBOptions", "StoreMemory", "safe_name", "store_path"]

META_FAMILY = "sampan"
_POSITION_KEY = b"changelog-position"
_MAX_NAME = 200  # stay well below the 255-byte file-name limit of common filesystems
# Iteration reads chunks of growing size, so no RocksDB iterator outlives a `yield`:
# an abandoned generator then cannot keep the database (and its LOCK) open.
_FIRST_CHUNK = 64
_MAX_CHUNK = 4096


_SHARED_ARENA_BLOCK = 256 << 10
"""Memtable arena block size under a shared bound: every store's active memtable holds at
least one block, so with many stores the default (up to 1 MiB each) would add up."""


class StoreMemory:
    """One memory bound for many RocksDB stores (all those of a worker process): one LRU
    block cache of ``total_mb``, with the memtables of every store charged to it through
    one write-buffer manager that flushes once they pass half of it.

    The cache also holds the index and filter blocks, so reads, write buffers, indexes
    and filters all count against the one figure (as Kafka Streams' bounded-memory
    RocksDB config does)."""

    def __init__(self, total_mb: int) -> None:
        self.total_mb = total_mb
        self.cache = Cache(total_mb << 20)
        self.write_buffers = WriteBufferManager.new_write_buffer_manager_with_cache(
            (total_mb << 20) // 2, False, self.cache)

    def __repr__(self) -> str:
        return f"StoreMemory({self.total_mb} MiB)"

    def usage(self) -> tuple[int, int]:
        """(bytes in the cache, memtable bytes charged to it)."""
        return int(self.cache.get_usage()), int(self.write_buffers.get_usage())


@dataclass(frozen=True)
class RocksDBOptions:
    """RocksDB tuning, chosen for large write batches (commits, restores) and point reads."""

    write_buffer_mb: int = 64
    """Memtable size; large batches fill small memtables fast and cause many L0 files."""
    max_write_buffers: int = 4
    """Memtables (1 active + immutable ones) before writes stall while flushes catch up."""
    block_cache_mb: int = 32
    """LRU cache of data blocks for reads."""
    bloom_bits_per_key: int = 10
    """Bloom filter size; makes `get` of missing keys (common in tasks) skip disk reads."""
    background_threads: int = 0
    """Flush/compaction threads; 0 means one per CPU (at most 4)."""
    restore_write_buffer_mb: int = 8
    """Memtable size while restoring (vector memtables, see `RocksDBEngine.bulk_load`)."""
    compression: str = "lz4"
    """Compression of the upper levels: lz4, zstd, snappy or none (the bottom is zstd)."""
    memory: StoreMemory | None = field(default=None, compare=False)
    """The bound shared with the other stores of the process; None: this store's own
    ``block_cache_mb`` cache and unmanaged write buffers."""


def safe_name(name: str) -> str:
    """``name`` as one directory name: percent-encoded, injective, bounded length.

        >>> safe_name("Partition 3")
        'Partition%203'
        >>> safe_name("SystemStreamPartition [local, clicks, 3]")
        'SystemStreamPartition%20%5Blocal%2C%20clicks%2C%203%5D'
        >>> safe_name("..")
        '%2E%2E'
    """
    encoded = quote(name, safe="")
    if not encoded.strip("."):
        encoded = encoded.replace(".", "%2E")  # "." and ".." are not directories of their own
    if len(encoded) > _MAX_NAME:
        digest = hashlib.sha256(name.encode()).hexdigest()[:16]
        encoded = f"{encoded[: _MAX_NAME - 17]}-{digest}"
    return encoded


def store_path(data_dir: str | os.PathLike[str], store: str, task: str) -> Path:
    """Where the RocksDB database of ``store`` for ``task`` lives under ``data_dir``."""
    return Path(data_dir) / "stores" / safe_name(store) / safe_name(task)


def _options(tuning: RocksDBOptions, *, bulk: bool = False) -> Options:
    """RocksDB options from ``tuning``; ``bulk`` for restores (see `RocksDBEngine.bulk_load`)."""
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    options.increase_parallelism(tuning.background_threads or min(4, os.cpu_count() or 1))
    options.set_write_buffer_size(tuning.write_buffer_mb << 20)
    options.set_max_write_buffer_number(tuning.max_write_buffers)
    options.set_level_compaction_dynamic_level_bytes(True)
    options.set_compression_type(  # lz4 by default: cheap on the write path
        getattr(DBCompressionType, tuning.compression)())
    options.set_bottommost_compression_type(DBCompressionType.zstd())  # dense at rest
    options.set_bytes_per_sync(1 << 20)  # smooth out write-back instead of bursts
    options.set_keep_log_file_num(2)  # many stores per worker: keep info logs small
    table = BlockBasedOptions()
    if tuning.bloom_bits_per_key:
        table.set_bloom_filter(tuning.bloom_bits_per_key, False)
    _bound(options, table, tuning)
    options.set_block_based_table_factory(table)
    if bulk:
        # Appending to a vector beats inserting into the default skip list ~7x; the
        # memtable is sorted once, when it is flushed (a background thread, outside the
        # GIL). Point reads of a vector memtable scan it, so only restores use it.
        options.set_memtable_factory(MemtableFactory.vector())
        options.set_allow_concurrent_memtable_write(False)  # a vector memtable needs this
        # Small memtables, so flushes (and their sorts) run in the background while the
        # restore reads, instead of as one long flush at its end.
        options.set_write_buffer_size(tuning.restore_write_buffer_mb << 20)
    return options


def _bound(options: Options, table: BlockBasedOptions, tuning: RocksDBOptions) -> None:
    """The store's block cache and write buffers: shared with the process's other stores
    under one bound (`StoreMemory`), or its own."""
    if tuning.memory is None:
        table.set_block_cache(Cache(tuning.block_cache_mb << 20))
        return
    table.set_block_cache(tuning.memory.cache)
    table.set_cache_index_and_filter_blocks(True)
    table.set_pin_l0_filter_and_index_blocks_in_cache(True)
    options.set_write_buffer_manager(tuning.memory.write_buffers)
    options.set_arena_block_size(_SHARED_ARENA_BLOCK)


def _meta_options(tuning: RocksDBOptions) -> Options:
    """Options of the ``sampan`` column family (one key): its cache is the shared one."""
    options = Options(raw_mode=True)
    if tuning.memory is not None:
        table = BlockBasedOptions()
        _bound(options, table, tuning)
        options.set_block_based_table_factory(table)
    return options


def _encode_position(position: ChangelogPosition) -> bytes:
    return json.dumps(
        {"stream": position.stream, "partition": position.partition, "offset": position.offset}
    ).encode()


def _decode_position(raw: bytes) -> ChangelogPosition:
    fields = json.loads(raw)
    return ChangelogPosition(fields["stream"], int(fields["partition"]), int(fields["offset"]))


class RocksDBEngine:
    """A `StoreEngine` in a RocksDB database at ``path``; holds its LOCK while open."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        store: str = "?",
        task: str = "?",
        options: RocksDBOptions | None = None,
    ) -> None:
        self.path = Path(path)
        self.store = store
        self.task = task
        self._tuning = options or RocksDBOptions()
        self._db: Rdict | None = None
        self._meta: ColumnFamily | None = None  # handle of META_FAMILY
        self._position: ChangelogPosition | None = None
        self._bulk = False
        self._open()

    @classmethod
    def open(
        cls,
        data_dir: str | os.PathLike[str],
        store: str,
        task: str,
        options: RocksDBOptions | None = None,
    ) -> RocksDBEngine:
        """Open (creating if needed) the database of ``store`` for ``task`` under ``data_dir``."""
        if not task:
            raise StoreError(f"store {store!r}: the task name is empty; tasks must be named")
        return cls(store_path(data_dir, store, task), store=store, task=task, options=options)

    @property
    def memory(self) -> StoreMemory | None:
        """The process-wide bound this store's cache and write buffers count against."""
        return self._tuning.memory

    def _where(self) -> str:
        return f"store {self.store!r} of task {self.task!r} at {self.path}"

    def _open(self) -> None:
        trash = self._trash_path()
        if trash.exists():
            shutil.rmtree(trash)  # a wipe that crashed after its rename
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            db = Rdict(
                str(self.path),
                _options(self._tuning, bulk=self._bulk),
                column_families={META_FAMILY: _meta_options(self._tuning)},
            )
        except Exception as exc:
            if "LOCK:" in str(exc):  # "While lock file: <path>/LOCK: …", "lock hold by …/LOCK: …"
                raise StoreLockedError(
                    f"cannot open {self._where()}: another worker holds this task (its RocksDB "
                    f"LOCK file is taken). Stop the other worker (or the other process using "
                    f"this data directory) and retry. RocksDB said: {exc}"
                ) from exc
            raise self._failed("open", exc) from exc
        self._db = db
        self._meta = db.get_column_family_handle(META_FAMILY)
        meta = db.get_column_family(META_FAMILY)
        raw = meta.get(_POSITION_KEY)
        del meta  # a column-family Rdict would keep the database (and its LOCK) open
        try:
            self._position = None if raw is None else _decode_position(raw)
        except (ValueError, KeyError, TypeError) as exc:
            self.close()
            raise StoreError(
                f"{self._where()}: unreadable changelog position {raw!r} ({exc}); delete the "
                f"directory to restore the store from its changelog"
            ) from exc

    @contextmanager
    def bulk_load(self) -> Iterator[None]:
        """Reopen the database tuned for a restore's write batches, then back for processing.

        Inside, writes go to vector memtables (append now, sort at flush); on leaving, the
        memtables are flushed and the database is reopened with the normal options, so
        reads are fast again. Crash safety is unchanged: every batch still goes through
        the write-ahead log with its changelog position.
        """
        if self._bulk:
            yield
            return
        self._reopen(bulk=True)
        try:
            yield
        finally:
            self._reopen(bulk=False)  # closing flushes (sorts) the vector memtables

    @property
    def bulk_loading(self) -> bool:
        """True inside `bulk_load` (the database runs with restore options)."""
        return self._bulk

    def _reopen(self, *, bulk: bool) -> None:
        self.close()
        self._bulk = bulk
        self._open()

    def _trash_path(self) -> Path:
        return self.path.with_name(self.path.name + ".wiping")

    def _require_db(self) -> Rdict:
        if self._db is None:
            raise StoreError(f"{self._where()} is closed; reopen it before use")
        return self._db

    def get(self, key: bytes) -> bytes | None:
        try:
            value: bytes | None = self._require_db().get(key)
        except DbClosedError as exc:
            raise StoreError(f"{self._where()} is closed; reopen it before use") from exc
        except Exception as exc:
            raise self._failed("read", exc) from exc
        return value

    def _failed(self, what: str, error: Exception) -> StoreError:
        """The error of a failed open/read/write: `StoreCorruptedError` for damaged files."""
        text = " ".join(str(error).split())
        if "Corruption" in text or "corrupt" in text:
            return StoreCorruptedError(
                f"{self._where()} is damaged ({text})", path=str(self.path), store=self.store,
                task=self.task)
        if "Permission denied" in text or "Read-only file system" in text:
            return StoreError(f"cannot {what} {self._where()}: the folder is not writable "
                              f"({text}); give this user write access to it")
        return StoreError(f"cannot {what} {self._where()}: {text}")

    def iterate(
        self, start: bytes | None = None, end: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        self._require_db()
        return self._iterate(start, end)

    def _iterate(self, start: bytes | None, end: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        size = _FIRST_CHUNK
        key = start
        while True:
            read = ReadOptions()
            if end is not None:
                read.set_iterate_upper_bound(end)
            chunk = self._chunk(key, read, size)
            yield from chunk
            if len(chunk) < size:
                return
            key = chunk[-1][0] + b"\x00"  # the smallest key after the last one seen
            size = min(size * 4, _MAX_CHUNK)

    def _chunk(self, start: bytes | None, read: ReadOptions, size: int) -> list[
        tuple[bytes, bytes]
    ]:
        # Its own frame, so the RocksDB iterator is released before the caller yields.
        try:
            entries = self._require_db().items(from_key=start, read_opt=read)
            # Raw mode: keys and values are always bytes.
            return list(islice(cast(Iterable[tuple[bytes, bytes]], entries), size))
        except StoreError:
            raise
        except Exception as exc:
            raise self._failed("read", exc) from exc

    def write_batch(
        self, items: Mapping[bytes, bytes | None], changelog: ChangelogPosition | None
    ) -> None:
        if not items and (changelog is None or changelog == self._position):
            return
        db = self._require_db()
        batch = WriteBatch(raw_mode=True)
        put = batch.put
        delete = batch.delete
        for key, value in items.items():
            if value is None:
                delete(key)
            else:
                put(key, value)
        self._write(db, batch, changelog)

    def write_pairs(
        self, keys: Sequence[bytes], values: Sequence[bytes | None],
        changelog: ChangelogPosition | None,
    ) -> None:
        """Like `write_batch` for parallel key/value lists in log order (restore's fast path:
        no dict is built; a later put of a key overrides an earlier one, as in the log)."""
        db = self._require_db()
        batch = WriteBatch(raw_mode=True)
        put = batch.put
        delete = batch.delete
        for key, value in zip(keys, values, strict=True):
            if value is None:
                delete(key)
            else:
                put(key, value)
        self._write(db, batch, changelog)

    def _write(self, db: Rdict, batch: WriteBatch, changelog: ChangelogPosition | None) -> None:
        if changelog is not None:
            batch.put(_POSITION_KEY, _encode_position(changelog), self._meta)
        try:
            db.write(batch)
        except Exception as exc:
            raise self._failed("write", exc) from exc
        if changelog is not None:
            self._position = changelog

    def changelog_position(self) -> ChangelogPosition | None:
        return self._position

    def wipe(self) -> None:
        """Delete the database files and start empty.

        The directory is first renamed (atomic), so a crash mid-wipe leaves either the
        old store or none — never a half-deleted one; `_open` clears the leftover.
        """
        self.close()
        if self.path.exists():
            trash = self._trash_path()
            os.replace(self.path, trash)
            shutil.rmtree(trash)
        self._open()

    def count(self) -> int:
        # Rdict has no __iter__ (iterating it falls back to integer indexing), hence keys().
        return sum(1 for _ in self._require_db().keys())  # noqa: SIM118

    def close(self) -> None:
        db, self._db, self._meta = self._db, None, None
        if db is not None:
            db.close()
