"""`job.store_memory_mb`: every RocksDB store a worker opens, of every task, counts its
block cache and write buffers against one bound."""

from __future__ import annotations

from pathlib import Path

from framework.config import parse_config
from framework.metadata.jobmodel import TaskModel
from framework.stores.rocksdb import RocksDBEngine, store_path
from framework.systems.local.system import LocalSystem
from framework.worker.task_stores import open_task_stores, process_memory
from groupers import SystemStreamPartition as SSP


def _options_file(path: Path) -> dict[str, list[str]]:
    """RocksDB's own record of the options it opened with (its newest OPTIONS file)."""
    found: dict[str, list[str]] = {}
    for line in sorted(path.glob("OPTIONS-*"))[-1].read_text().splitlines():
        key, sep, value = line.strip().partition("=")
        if sep:
            found.setdefault(key, []).append(value)
    return found


def _config(tmp_path: Path, memory_mb: int | None) -> object:
    job: dict[str, object] = {"name": "j", "task": "m:T", "inputs": ["local.a"]}
    if memory_mb is not None:
        job["store_memory_mb"] = memory_mb
    return parse_config({
        "job": job, "systems": {"local": {"type": "local", "path": "data"}},
        "streams": {"local.a": {"partitions": 4}},
        "stores": {"s": {}, "t": {"rocksdb": {"write_buffer_mb": 8}}},
    }, tmp_path / "j.toml")


async def test_every_store_of_every_task_shares_the_workers_one_bound(tmp_path: Path) -> None:
    config = _config(tmp_path, 64)
    meta = LocalSystem("local", tmp_path / "data")
    for store in ("s", "t"):
        await meta.create_stream(config.changelog_ref(store).stream, 4,  # type: ignore
                                 compacted=True)
    memory = process_memory(config)  # type: ignore[arg-type]
    assert memory is not None and memory.total_mb == 64
    engines: list[RocksDBEngine] = []
    for p in range(4):
        task = TaskModel(f"Partition {p}", frozenset({SSP("local", "a", p)}), p, 0)
        opened = await open_task_stores(config, task, None, meta)  # type: ignore[arg-type]
        for store in opened.stores.values():
            engine = store.engine  # type: ignore[attr-defined]
            assert isinstance(engine, RocksDBEngine)
            engines.append(engine)
    assert len(engines) == 8 and all(e.memory is memory for e in engines)

    # Each store's memtable is charged to the shared manager: writing to any one of them
    # raises its usage, and the cache holds at least what it charges.
    for engine in engines:
        before = memory.usage()[1]
        engine.write_batch({b"key-%d" % i: b"x" * 512 for i in range(2000)}, None)
        assert memory.usage()[1] > before, engine.path
    cache, write_buffers = memory.usage()
    assert cache >= write_buffers > 8 * 2000 * 512
    for engine in engines:
        engine.close()
    await meta.close()

    # RocksDB's own record of each database's options (both column families): index and
    # filter blocks in the cache, small memtable arenas.
    for p in range(4):
        for store in ("s", "t"):
            chosen = _options_file(store_path(config.state_dir, store,  # type: ignore
                                              f"Partition {p}"))
            assert chosen["arena_block_size"] == [str(256 << 10)] * 2
            assert chosen["cache_index_and_filter_blocks"] == ["true"] * 2
            assert chosen["pin_l0_filter_and_index_blocks_in_cache"] == ["true"] * 2


def test_zero_gives_each_store_its_own_cache(tmp_path: Path) -> None:
    config = _config(tmp_path, 0)
    assert process_memory(config) is None  # type: ignore[arg-type]
    default = _config(tmp_path, None)
    assert default.store_memory_mb == 256  # type: ignore[attr-defined]
