"""State stores: byte-level engines (RocksDB, memory), the task-facing buffered store, restore.

See ``docs/stores.md`` for the on-disk layout, the commit interplay and the restore rules.
"""

from framework.stores.base import ChangelogPosition, StoreEngine, prefix_end
from framework.stores.buffer import Serde, TaskStore
from framework.stores.memory import MemoryEngine
from framework.stores.restore import (
    Fetch,
    RestoreMode,
    RestorePlan,
    RestoreResult,
    RestoreStopped,
    changelog_reader,
    plan_restore,
    restore_store,
)
from framework.stores.rocksdb import (
    RocksDBEngine,
    RocksDBOptions,
    StoreMemory,
    safe_name,
    store_path,
)

__all__ = [
    "ChangelogPosition",
    "Fetch",
    "MemoryEngine",
    "RestoreMode",
    "RestorePlan",
    "RestoreResult",
    "RestoreStopped",
    "RocksDBEngine",
    "RocksDBOptions",
    "Serde",
    "StoreEngine",
    "StoreMemory",
    "TaskStore",
    "changelog_reader",
    "plan_restore",
    "prefix_end",
    "restore_store",
    "safe_name",
    "store_path",
]
