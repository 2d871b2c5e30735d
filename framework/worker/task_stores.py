"""Open a task's stores for a worker: reuse valid local state, restore the rest from changelogs."""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from framework.config import RocksDBConfig, StoreConfig, StreamRef
from framework.config.serdes import get_serde
from framework.errors import StoreCorruptedError, StoreError, StoreLockedError
from framework.inputs_check import OffsetsReader
from framework.metadata.jobmodel import TaskModel
from framework.metrics import restore_progress
from framework.stores import (
    MemoryEngine,
    RocksDBEngine,
    RocksDBOptions,
    StoreEngine,
    StoreMemory,
    TaskStore,
    changelog_reader,
    restore_store,
)
from framework.systems.base import Checkpoint, System
from groupers import SystemStreamPartition

__all__ = ["OpenedStores", "StoreSettings", "heal_damaged_store", "open_task_stores"]

log = logging.getLogger(__name__)


class StoreSettings(Protocol):
    """The settings opening a task's stores reads (a `JobConfig` is one): its stores, their
    changelogs, where they live and the bounds on memory, write buffers and restores."""

    @property
    def stores(self) -> Mapping[str, StoreConfig]: ...
    @property
    def logged_stores(self) -> tuple[str, ...]: ...
    @property
    def state_dir(self) -> Path: ...
    @property
    def root(self) -> Path: ...
    @property
    def store_memory_mb(self) -> int: ...
    @property
    def write_buffer_max_keys(self) -> int: ...
    @property
    def store_restore_batch(self) -> int: ...
    def store(self, name: str) -> StoreConfig: ...
    def changelog_ref(self, store: str) -> StreamRef: ...


@dataclass
class OpenedStores:
    """A task's open stores, where each logged one's changelog stands, and what restore did."""

    stores: dict[str, TaskStore] = field(default_factory=dict)
    positions: dict[str, int] = field(default_factory=dict)  # store -> changelog end offset
    restored: int = 0
    modes: dict[str, str] = field(default_factory=dict)  # store -> none | delta | full


LOCK_WAIT_S = 30.0
"""How long a worker waits for another process to release a store it must open (a worker
of an older epoch still stopping, which notices its fence within a second)."""


def heal_damaged_store(config: StoreSettings, error: StoreCorruptedError) -> None:
    """Wipe a damaged RocksDB store that has a changelog, so that it is restored fully from
    it; a store without a changelog cannot be rebuilt: raise a `StoreError` naming its folder
    and what to do."""
    if not config.store(error.store).changelog:
        raise StoreError(
            f"{error}; store {error.store!r} has no changelog to restore it from: move "
            f"{error.path} away to start it empty (its contents are lost), or put back a "
            f"backup of it") from error
    log.error("%s; wiping %s: the store is restored fully from its changelog", error,
              error.path)
    shutil.rmtree(error.path, ignore_errors=True)


def rocksdb_options(store: StoreConfig, memory: StoreMemory | None = None) -> RocksDBOptions:
    """The engine tuning a store's ``[stores.<name>.rocksdb]`` table asks for, under the
    process's shared ``memory`` bound when given (`process_memory`)."""
    tuning = store.rocksdb or RocksDBConfig()
    return RocksDBOptions(
        write_buffer_mb=tuning.write_buffer_mb, max_write_buffers=tuning.max_write_buffers,
        block_cache_mb=tuning.block_cache_mb, bloom_bits_per_key=tuning.bloom_bits_per_key,
        compression=tuning.compression, memory=memory)


_MEMORY: dict[int, StoreMemory] = {}


def process_memory(config: StoreSettings) -> StoreMemory | None:
    """This process's one `StoreMemory` of ``job.store_memory_mb`` (every store of every
    task of a worker counts against it); None when the job sets 0."""
    size = config.store_memory_mb
    if not size:
        return None
    if size not in _MEMORY:
        _MEMORY[size] = StoreMemory(size)
    return _MEMORY[size]


async def _engine(config: StoreSettings, store: str, task: str,
                  still_current: Callable[[], Awaitable[None]] | None) -> StoreEngine:
    if config.store(store).type == "memory":
        return MemoryEngine()
    deadline = time.monotonic() + LOCK_WAIT_S
    waiting = False
    while True:
        try:
            return RocksDBEngine.open(config.state_dir, store, task, options=rocksdb_options(
                config.store(store), process_memory(config)))
        except StoreCorruptedError as error:
            heal_damaged_store(config, error)  # raises for a store without changelog
        except StoreLockedError:
            if time.monotonic() > deadline:
                raise
            if not waiting:
                log.info("store %r of task %r is open in another process; waiting up to "
                         "%.0f s for it to let go", store, task, LOCK_WAIT_S)
                waiting = True
            if still_current is not None:
                await still_current()  # a stale worker must not wait for the current one
            await asyncio.sleep(0.2)


async def open_task_stores(
    config: StoreSettings, task: TaskModel, checkpoint: Checkpoint | None, meta: System,
    stop: Callable[[], bool] | None = None,
    still_current: Callable[[], Awaitable[None]] | None = None,
    offsets: OffsetsReader | None = None,
) -> OpenedStores:
    """Open every store of ``task``; logged ones are brought up to their restore end.

    The restore end is the changelog's end offset. On a system without atomic commits
    (kafka) it is the checkpointed changelog offset when there is one: records written
    after the last checkpoint belong to inputs that will be processed again. ``stop`` ends
    a restore early with `RestoreStopped` (its progress is kept for the next start);
    ``still_current`` raises `FencedError` once the worker's epoch is no longer current.
    ``offsets`` reads a changelog's offsets (`StartOffsets.offsets` at a worker's start:
    one read for all its tasks); ``meta.offsets`` when None.
    """
    opened = OpenedStores()
    read = offsets or (lambda _system, stream: meta.offsets(stream))
    try:
        await _open_each(config, task, checkpoint, meta, opened, stop, still_current, read)
    except BaseException:  # cancelled or failed: let go of what was opened (its locks)
        for store in opened.stores.values():
            store.close()
        raise
    return opened


async def _open_each(
    config: StoreSettings, task: TaskModel, checkpoint: Checkpoint | None, meta: System,
    opened: OpenedStores, stop: Callable[[], bool] | None,
    still_current: Callable[[], Awaitable[None]] | None, offsets: OffsetsReader,
) -> None:
    for name in sorted(config.stores):
        spec = config.store(name)
        engine = await _engine(config, name, task.name, still_current)
        try:
            store = TaskStore(name, engine, get_serde(spec.key_serde, search_path=config.root),
                              get_serde(spec.value_serde, search_path=config.root),
                              config.write_buffer_max_keys, task=task.name)
            if name in config.logged_stores:
                stream = config.changelog_ref(name).stream
                ssp = SystemStreamPartition(meta.name, stream, task.changelog_partition)
                ranges = await offsets(meta.name, stream)
                span = ranges.get(task.changelog_partition)
                oldest, end = (span.oldest, span.end) if span else (0, 0)
                if not meta.atomic_commit and checkpoint and name in checkpoint.changelogs:
                    end = min(end, checkpoint.changelogs[name])
                    oldest = min(oldest, end)
                result = await restore_store(
                    engine, changelog=(stream, task.changelog_partition),
                    fetch=changelog_reader(meta, ssp, end, batch_size=config.store_restore_batch),
                    end=end, oldest=oldest, batch_size=config.store_restore_batch,
                    progress=restore_progress(task.name, name), stop=stop,
                    label=f"store {name!r} of task {task.name!r}")
                opened.positions[name] = end
                opened.restored += result.records
                opened.modes[name] = result.mode
        except BaseException:
            engine.close()
            raise
        opened.stores[name] = store
