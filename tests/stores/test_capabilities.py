"""Optional engine and system capabilities are protocols, checked with isinstance."""

from __future__ import annotations

from pathlib import Path

from framework.stores import MemoryEngine, RocksDBEngine, TaskStore
from framework.stores.base import BufferedStore, BulkLoadable, PairWriter
from framework.systems.base import ColumnReader
from framework.systems.kafka.system import KafkaSystem
from framework.systems.local.system import LocalSystem


def test_rocksdb_has_bulk_load_and_pair_writes_memory_has_neither(tmp_path: Path) -> None:
    engine = RocksDBEngine(tmp_path / "store", store="s", task="Partition 0")
    try:
        assert (isinstance(engine, BulkLoadable), isinstance(engine, PairWriter)) == (True, True)
    finally:
        engine.close()
    memory = MemoryEngine()
    assert (isinstance(memory, BulkLoadable), isinstance(memory, PairWriter)) == (False, False)


def test_the_local_log_reads_columns_kafka_does_not(tmp_path: Path) -> None:
    assert isinstance(LocalSystem("local", tmp_path), ColumnReader)
    assert not isinstance(KafkaSystem("kafka", "127.0.0.1:9"), ColumnReader)


def test_a_task_store_is_what_the_worker_needs_of_a_store() -> None:
    from framework.config.serdes import get_serde

    store: BufferedStore = TaskStore("s", MemoryEngine(), get_serde("string"),
                                     get_serde("json"), max_keys=2)
    store.put("a", 1)
    assert (store.buffered, store.is_full, store.get("a")) == (1, False, 1)
    store.put("b", 2)
    assert store.is_full
    items = store.drain()
    assert items == {b"a": b"1", b"b": b"2"}
    store.apply(items, None)
    assert (store.buffered, store.get("b")) == (0, 2)
