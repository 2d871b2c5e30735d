"""`[stores.<name>.rocksdb]` reaches the RocksDB database a worker opens for each task."""

from __future__ import annotations

from pathlib import Path

from framework.config import parse_config
from framework.stores.rocksdb import RocksDBEngine, store_path
from framework.worker.task_stores import rocksdb_options


def _options_file(path: Path) -> dict[str, list[str]]:
    """RocksDB's own record of the options it opened with (its newest OPTIONS file)."""
    newest = sorted(path.glob("OPTIONS-*"))[-1]
    found: dict[str, list[str]] = {}
    for line in newest.read_text().splitlines():
        key, sep, value = line.strip().partition("=")
        if sep:
            found.setdefault(key, []).append(value)
    return found


def test_the_job_files_rocksdb_table_configures_the_database(tmp_path: Path) -> None:
    config = parse_config({
        "job": {"name": "j", "task": "m:T", "inputs": ["local.a"]},
        "systems": {"local": {"type": "local"}}, "streams": {"local.a": {}},
        "stores": {"s": {"rocksdb": {"compression": "zstd", "write_buffer_mb": 3,
                                     "bloom_bits_per_key": 0}},
                   "d": {}},
    }, tmp_path / "j.toml")
    engine = RocksDBEngine.open(tmp_path, "s", "Partition 0",
                                options=rocksdb_options(config.store("s")))
    engine.close()
    chosen = _options_file(store_path(tmp_path, "s", "Partition 0"))
    assert chosen["compression"][0] == "kZSTD"
    assert str(3 << 20) in chosen["write_buffer_size"]
    assert set(chosen["filter_policy"]) == {"nullptr"}  # bloom filter off

    engine = RocksDBEngine.open(tmp_path, "d", "Partition 0",
                                options=rocksdb_options(config.store("d")))
    engine.close()
    defaults = _options_file(store_path(tmp_path, "d", "Partition 0"))
    assert defaults["compression"][0] == "kLZ4Compression"
    assert str(64 << 20) in defaults["write_buffer_size"]
    assert any("bloom" in policy.lower() for policy in defaults["filter_policy"])
