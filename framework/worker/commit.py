"""The commit protocol (DESIGN.md §6): outputs + changelog + checkpoints, then local state.

On a system with atomic commits (local) everything goes in one transaction and the
checkpoint's changelog positions are the predicted ones (a task's changelog partition
has one writer, so offsets are sequential). On Kafka with ``guarantee =
"exactly-once"`` records and then the checkpoints, with the positions the records got,
go in one Kafka transaction (`begin_commits` starts it before checkpoints are read);
with at-least-once, records are produced and flushed first and the checkpoint follows.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from framework.config import JobConfig
from framework.errors import UnsupportedOperation
from framework.metrics import current as current_metrics
from framework.stores.base import ChangelogPosition
from framework.systems.base import (
    Checkpoint,
    CommitRequest,
    ProducerRecord,
    RecordPosition,
    System,
)
from framework.worker.codec import RecordCodec
from framework.worker.instance import TaskInstance

__all__ = ["Committer", "begin_commits", "check_guarantee"]

log = logging.getLogger(__name__)


async def begin_commits(config: JobConfig, worker_id: int, meta: System) -> None:
    """Exactly-once on a system without atomic commits: start the worker's transactional
    producer, fencing its previous incarnation, before any checkpoint is read."""
    if config.guarantee != "exactly-once" or meta.atomic_commit:
        return
    start = getattr(meta, "start_transactions", None)
    if start is None:
        raise _no_transactions(meta)
    await start(config.name, worker_id)


def _no_transactions(meta: System) -> UnsupportedOperation:
    return UnsupportedOperation(
        f'[job] guarantee = "exactly-once": system {meta.name!r} has no transactions; '
        'set guarantee = "at-least-once" or keep the metadata on a local system')


async def check_guarantee(config: JobConfig, meta: System) -> None:
    """Refuse ``guarantee = "exactly-once"`` at once when ``meta`` cannot run it (for a
    coordinator's start; workers refuse in `begin_commits` anyway)."""
    if config.guarantee != "exactly-once" or meta.atomic_commit:
        return
    probe = getattr(meta, "probe_transactions", None)
    if probe is None:
        raise _no_transactions(meta)
    await probe(config.name)


@dataclass
class _StoreWrites:
    instance: TaskInstance
    store: str
    items: dict[bytes, bytes | None]
    changelog: tuple[str, int] | None  # (stream in the metadata system, partition)
    first: int  # index of its first changelog record in the commit's record list


class Committer:
    """Commits a worker's tasks together and keeps each store's changelog position."""

    def __init__(
        self,
        config: JobConfig,
        systems: Mapping[str, System],
        codec: RecordCodec,
        epoch: int,
        changelog_partition: Mapping[str, int],
        changelog_positions: dict[tuple[str, str], int],
    ) -> None:
        self._config = config
        self._systems = systems
        self._meta = systems[config.metadata_system]
        self._codec = codec
        self._epoch = epoch
        self._changelog_partition = changelog_partition
        self.positions = changelog_positions  # (task, store) -> changelog position
        self.commits = 0
        self._transactional = (config.guarantee == "exactly-once" and not self._meta.atomic_commit
                               and getattr(self._meta, "transactions", None) is not None)

    def _changelog_of(self, store: str) -> tuple[str, bool]:
        qualified = self._config.changelog_stream(store)
        return qualified.partition(".")[2], store in self._config.logged_stores

    async def commit(self, instances: Sequence[TaskInstance]) -> None:
        """Write everything the instances produced since the last commit; then apply state."""
        started = time.perf_counter()
        other: dict[str, list[ProducerRecord]] = defaultdict(list)
        records: list[ProducerRecord] = []
        writes: list[_StoreWrites] = []
        for instance in instances:
            for message in instance.outputs:
                system, record = self._codec.encode(message)
                (records if system == self._config.metadata_system else other[system]).append(
                    record)
            for system, record in instance.raw_outputs:
                (records if system == self._config.metadata_system else other[system]).append(
                    record)
            for name, store in instance.stores.items():
                items = store.drain()
                stream, logged = self._changelog_of(name)
                if not logged:
                    writes.append(_StoreWrites(instance, name, items, None, len(records)))
                    continue
                partition = self._changelog_partition[instance.name]
                writes.append(
                    _StoreWrites(instance, name, items, (stream, partition), len(records)))
                records.extend(ProducerRecord(stream, key, value, partition=partition)
                               for key, value in items.items())
        for system, produced in other.items():
            await self._systems[system].produce(produced)  # at-least-once outside the log
        if self._meta.atomic_commit:
            predicted = self._predict(writes)
            landed = await self._meta.commit(CommitRequest(
                self._config.name, self._epoch, records, self._checkpoints(instances, predicted)))
        elif self._transactional:
            def checkpoints(positions: list[RecordPosition]) -> list[Checkpoint]:
                return self._checkpoints(instances, self._actual(writes, positions))

            landed = await self._meta.commit_transaction(  # type: ignore[attr-defined]
                self._config.name, self._epoch, records, checkpoints)
            predicted = self._actual(writes, landed)
        else:
            landed = await self._meta.produce(records) if records else []
            actual = self._actual(writes, landed)
            await self._meta.commit(CommitRequest(
                self._config.name, self._epoch, (), self._checkpoints(instances, actual)))
            predicted = actual
        self._check(writes, landed, predicted)
        for write in writes:
            position = None
            if write.changelog is not None:
                offset = predicted[(write.instance.name, write.store)]
                position = ChangelogPosition(write.changelog[0], write.changelog[1], offset)
                self.positions[(write.instance.name, write.store)] = offset
            write.instance.stores[write.store].apply(write.items, position)
        if (metrics := current_metrics()) is not None:
            metrics.commit_done(time.perf_counter() - started, len(records) + sum(
                map(len, other.values())), instances, [(w.instance.name, w.store, len(
                    w.items)) for w in writes if w.changelog is not None])
        for instance in instances:
            instance.outputs.clear()
            instance.raw_outputs.clear()
            instance.commit_requested = False
        self.commits += 1

    def _predict(self, writes: list[_StoreWrites]) -> dict[tuple[str, str], int]:
        return {(w.instance.name, w.store): self.positions.get((w.instance.name, w.store), 0)
                + len(w.items) for w in writes if w.changelog is not None}

    def _actual(self, writes: list[_StoreWrites], landed: Sequence[object]) -> dict[
        tuple[str, str], int
    ]:
        result = {}
        for w in writes:
            if w.changelog is None:
                continue
            key = (w.instance.name, w.store)
            if w.items:
                result[key] = landed[w.first + len(w.items) - 1].offset + 1  # type: ignore[attr-defined]
            else:
                result[key] = self.positions.get(key, 0)
        return result

    def _check(self, writes: list[_StoreWrites], landed: Sequence[object],
               predicted: dict[tuple[str, str], int]) -> None:
        actual = self._actual(writes, landed)
        for key, offset in actual.items():
            if offset != predicted[key]:
                log.warning("changelog of store %s of task %s is at %d, expected %d; another "
                            "writer may share its partition", key[1], key[0], offset,
                            predicted[key])
                predicted[key] = offset

    def _checkpoints(self, instances: Sequence[TaskInstance],
                     changelogs: Mapping[tuple[str, str], int]) -> list[Checkpoint]:
        return [
            Checkpoint(
                task=instance.name,
                epoch=self._epoch,
                inputs=dict(instance.positions),
                changelogs={store: offset for (task, store), offset in changelogs.items()
                            if task == instance.name},
            )
            for instance in instances
        ]
