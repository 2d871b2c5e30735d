"""Standby and warmup copies: a task's stores kept current on a host that does not run it.

A replica tails the task's changelog partitions into local RocksDB with the same restore
code a worker uses at start (`framework.stores.restore`), up to the task's checkpointed
changelog offset — never past it: a worker that takes the task over restores to exactly
that offset (records after it belong to inputs that will be processed again), so a copy
ahead of it would have to be wiped. The copy's position is then where the takeover's
delta restore starts: only the gap is restored.

`Replicas.stop` runs inside a rebalance (the host's revoke step), so it must end whatever
the tailer is doing: one ``cancel()`` is not enough, because an await deep in a read can
swallow it (Python 3.11's ``asyncio.wait_for`` returns a result that completed as the cancel
arrived; the restore's read-ahead suppresses its prefetch's CancelledError) and the tailer
would then sleep and tail on while the rebalance waits for it forever. So the tailer also
checks a stop flag between rounds, and `stop` repeats the cancel until the tailer is done.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from framework.cancel import cancel_and_wait
from framework.config import JobConfig
from framework.metadata.jobmodel import TaskModel
from framework.stores import RocksDBEngine, changelog_reader, restore_store
from framework.systems.base import System
from framework.worker.task_stores import process_memory, rocksdb_options
from groupers import SystemStreamPartition

__all__ = ["Replicas"]

log = logging.getLogger(__name__)


class Replicas:
    """Keeps this host's standby and warmup copies current until stopped."""

    def __init__(self, config: JobConfig, meta: System, tasks: Mapping[str, TaskModel],
                 interval_s: float = 0.5) -> None:
        self.config = config
        self.meta = meta
        self.tasks = dict(tasks)
        self.interval_s = interval_s
        self.gaps: dict[str, int] = {}
        """Task → changelog records its copy is behind the restore end (last round)."""
        self.applied = 0
        self._engines: dict[tuple[str, str], RocksDBEngine] = {}
        self._runner: asyncio.Task[None] | None = None
        self._stopping = False

    def start(self) -> None:
        stores = [s for s in self.config.logged_stores
                  if self.config.store(s).type == "rocksdb"]
        for task in sorted(self.tasks):
            for store in stores:
                self._engines[(task, store)] = RocksDBEngine.open(
                    self.config.state_dir, store, task,
                    options=rocksdb_options(self.config.store(store),
                                            process_memory(self.config)))
        if self._engines:
            self._runner = asyncio.create_task(self._run())

    def copy_of(self, task: str, store: str) -> RocksDBEngine | None:
        """The open copy of ``task``'s ``store`` here (None: none, or stopped): read-only,
        for standby reads (`framework.queries.standby`)."""
        return self._engines.get((task, store))

    async def _run(self) -> None:
        while not self._stopping:
            try:
                await self._catch_up()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a broker blip: try again next round
                log.warning("standby/warmup copies: %r; retrying", error)
            if not self._stopping:
                await asyncio.sleep(self.interval_s)

    async def _catch_up(self) -> None:
        checkpoints = await self.meta.read_checkpoints(self.config.name)
        gaps: dict[str, int] = {}
        for (task, store), engine in sorted(self._engines.items()):
            if self._stopping:
                return
            partition = self.tasks[task].changelog_partition
            stream = self.config.changelog_ref(store).stream
            span = (await self.meta.offsets(stream)).get(partition)
            oldest, end = (span.oldest, span.end) if span else (0, 0)
            checkpoint = checkpoints.get(task)
            if checkpoint is not None and store in checkpoint.changelogs:
                end = min(end, checkpoint.changelogs[store])
                oldest = min(oldest, end)
            position = engine.changelog_position()
            if position is not None and (position.stream, position.partition, position.offset
                                         ) == (stream, partition, end):
                gaps.setdefault(task, 0)
                continue  # current: nothing to read (and nothing to log every round)
            result = await restore_store(
                engine, changelog=(stream, partition),
                fetch=changelog_reader(self.meta, SystemStreamPartition(
                    self.meta.name, stream, partition), end,
                    batch_size=self.config.store_restore_batch),
                end=end, oldest=oldest, batch_size=self.config.store_restore_batch,
                progress=None, label=f"replica of store {store!r} of task {task!r}")
            self.applied += result.records
            position = engine.changelog_position()
            gaps[task] = gaps.get(task, 0) + max(0, end - (position.offset if position else 0))
        self.gaps = gaps

    async def stop(self, recancel_s: float = 0.5) -> None:
        """Stop tailing and close the copies (a worker may open them next).

        Sets the stop flag and cancels the tailer again every ``recancel_s`` until it has
        ended (see the module doc: a single cancel can be lost)."""
        self._stopping = True
        runner, self._runner = self._runner, None
        if runner is not None:
            await cancel_and_wait(runner, f"standby/warmup copies of tasks {sorted(self.tasks)}",
                                  recancel_s)
        for engine in self._engines.values():
            engine.close()
        self._engines.clear()
