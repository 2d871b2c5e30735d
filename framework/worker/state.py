"""Open a task's stores for a worker: reuse valid local state, restore the rest from changelogs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from framework.config import JobConfig
from framework.jobmodel import TaskModel
from framework.progress import Progress
from framework.serdes import get_serde
from framework.stores import (
    MemoryEngine,
    RocksDBEngine,
    StoreEngine,
    TaskStore,
    changelog_reader,
    restore_store,
)
from framework.systems.base import Checkpoint, System
from groupers import SystemStreamPartition

__all__ = ["OpenedStores", "open_task_stores"]


@dataclass
class OpenedStores:
    """A task's open stores, where each logged one's changelog stands, and what restore did."""

    stores: dict[str, TaskStore] = field(default_factory=dict)
    positions: dict[str, int] = field(default_factory=dict)  # store -> changelog end offset
    restored: int = 0
    modes: dict[str, str] = field(default_factory=dict)  # store -> none | delta | full


def _engine(config: JobConfig, store: str, task: str) -> StoreEngine:
    if config.store(store).type == "memory":
        return MemoryEngine()
    return RocksDBEngine.open(config.state_dir, store, task)


async def open_task_stores(
    config: JobConfig, task: TaskModel, checkpoint: Checkpoint | None, meta: System,
    stop: Callable[[], bool] | None = None,
) -> OpenedStores:
    """Open every store of ``task``; logged ones are brought up to their restore end.

    The restore end is the changelog's end offset. On a system without atomic commits
    (kafka) it is the checkpointed changelog offset when there is one: records written
    after the last checkpoint belong to inputs that will be processed again. ``stop`` ends
    a restore early with `RestoreStopped` (its progress is kept for the next start).
    """
    opened = OpenedStores()
    for name in sorted(config.stores):
        spec = config.store(name)
        engine = _engine(config, name, task.name)
        try:
            store = TaskStore(name, engine, get_serde(spec.key_serde, search_path=config.root),
                              get_serde(spec.value_serde, search_path=config.root),
                              config.write_buffer_max_keys, task=task.name)
            if name in config.logged_stores:
                stream = config.changelog_stream(name).partition(".")[2]
                ssp = SystemStreamPartition(meta.name, stream, task.changelog_partition)
                ranges = await meta.offsets(stream)
                span = ranges.get(task.changelog_partition)
                oldest, end = (span.oldest, span.end) if span else (0, 0)
                if not meta.atomic_commit and checkpoint and name in checkpoint.changelogs:
                    end = min(end, checkpoint.changelogs[name])
                    oldest = min(oldest, end)
                result = await restore_store(
                    engine, changelog=(stream, task.changelog_partition),
                    fetch=changelog_reader(meta, ssp, end, batch_size=config.store_restore_batch),
                    end=end, oldest=oldest, batch_size=config.store_restore_batch,
                    progress=Progress, stop=stop,
                    label=f"store {name!r} of task {task.name!r}")
                opened.positions[name] = end
                opened.restored += result.records
                opened.modes[name] = result.mode
        except BaseException:
            engine.close()
            raise
        opened.stores[name] = store
    return opened
