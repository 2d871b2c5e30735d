"""The commit protocol: outputs + changelog + checkpoints, then local state (DESIGN.md §6
"Commit protocol", and §12 "Exactly-once on Kafka"; docs/worker.md#the-commit-protocol).

On a system with atomic commits (local) everything goes in one transaction and the
checkpoint's changelog positions are the predicted ones (a task's changelog partition
has one writer, so offsets are sequential). On Kafka with ``guarantee =
"exactly-once"`` records and then the checkpoints, with the positions the records got,
go in one Kafka transaction (`begin_commits` starts it before checkpoints are read);
with at-least-once, records are produced and flushed first and the checkpoint follows.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from framework.config import JobConfig
from framework.errors import FencedError, UnsupportedOperation
from framework.metrics import current as current_metrics
from framework.stores.base import ChangelogPosition
from framework.systems.base import (
    Checkpoint,
    CommitRequest,
    OutputColumns,
    ProducerRecord,
    ProducerRow,
    RecordPosition,
    RowProducer,
    System,
    Transactional,
    producer_row,
)
from framework.worker.codec import Outgoing, RecordCodec, producer_record
from framework.worker.instance import TaskInstance
from groupers import SystemStreamPartition

__all__ = ["Committer", "PreparedCommit", "begin_commits", "check_guarantee"]

log = logging.getLogger(__name__)


async def begin_commits(config: JobConfig, worker_id: int, meta: System) -> None:
    """Exactly-once on a system without atomic commits: start the worker's transactional
    producer, fencing its previous incarnation, before any checkpoint is read."""
    if config.guarantee != "exactly-once" or meta.atomic_commit:
        return
    if not isinstance(meta, Transactional):
        raise _no_transactions(meta)
    await meta.start_transactions(config.name, worker_id)


def _no_transactions(meta: System) -> UnsupportedOperation:
    return UnsupportedOperation(
        f'[job] guarantee = "exactly-once": system {meta.name!r} has no transactions; '
        'set guarantee = "at-least-once" or keep the metadata on a local system')


async def check_guarantee(config: JobConfig, meta: System) -> None:
    """Refuse ``guarantee = "exactly-once"`` at once when ``meta`` cannot run it (for a
    coordinator's start; workers refuse in `begin_commits` anyway)."""
    if config.guarantee != "exactly-once" or meta.atomic_commit:
        return
    if not isinstance(meta, Transactional):
        raise _no_transactions(meta)
    await meta.probe_transactions(config.name)


@dataclass
class _StoreWrites:
    instance: TaskInstance
    store: str
    items: dict[bytes, bytes | None]
    changelog: tuple[str, int] | None  # (stream in the metadata system, partition)
    first: int  # index of its first changelog record in the commit's record list


@dataclass
class PreparedCommit:
    """What one commit writes, taken from the instances at `Committer.prepare`."""

    instances: list[TaskInstance]
    changelog: list[Outgoing] = field(default_factory=list)  # metadata system
    outputs: list[Outgoing] = field(default_factory=list)  # metadata system
    columns: list[OutputColumns] = field(default_factory=list)  # metadata system, after
    other: dict[str, list[Outgoing]] = field(default_factory=lambda: defaultdict(list))
    writes: list[_StoreWrites] = field(default_factory=list)
    inputs: dict[str, dict[SystemStreamPartition, int]] = field(default_factory=dict)
    sent: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Task → (outputs sent, dead letters and other raw records), for the metrics."""
    other_written: bool = False
    """Records to systems other than the metadata system were written (at-least-once)."""
    number: int = 0
    """The how-manieth commit this committer prepared (`Committer.landed`)."""
    landed: list[RecordPosition] | None = None
    """Without atomic commits or transactions: the metadata system's records were written
    (at these positions) and only the checkpoints are left."""


async def _produce(system: System, records: list[Outgoing],
                   positions: int) -> list[RecordPosition]:
    """``records`` (rows where ``system`` is a `RowProducer`, as `Committer.prepare`
    encodes them) written outside any commit; the first ``positions`` positions."""
    if isinstance(system, RowProducer):
        return await system.produce_rows(cast(list[ProducerRow], records),
                                         positions=positions)
    return await system.produce(cast(list[ProducerRecord], records), positions=positions)


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
        self.prepared = 0
        """Commits prepared so far (the last one's `PreparedCommit.number`)."""
        self.landed = 0
        """The number of the last commit that landed: commits land in the order they were
        prepared (one in flight; a refused one is written again before the next)."""
        meta = self._meta
        self._transactions = (meta if config.guarantee == "exactly-once"
                              and not meta.atomic_commit and isinstance(meta, Transactional)
                              and meta.transactions is not None else None)
        self._meta_rows = meta if isinstance(meta, RowProducer) else None
        self._inflight: asyncio.Future[None] | None = None  # the commit being written
        self.refused: PreparedCommit | None = None
        """The commit a newer epoch's fence refused before it wrote its checkpoints: what
        `retry_at` writes again once the worker took the newer job model in place."""
        self._row_systems = frozenset(name for name, system in systems.items()
                                      if isinstance(system, RowProducer))
        # Outputs to the metadata system go as columns where it takes them (the local
        # log, Kafka), until a send columns cannot carry (see
        # `RecordCodec.encode_columns`): rows from then on, for good, rather than
        # encoding twice at every commit.
        self._columns = self._meta_rows is not None

    async def start(self, instances: Sequence[TaskInstance]) -> None:
        """Commit everything so far. Where the metadata system writes over the network
        (kafka), processing goes on while the commit is acknowledged (`settle` waits for
        it); the local log's SQLite thread would only fight the loop for the GIL, so
        there the commit is waited for at once.

        At most one commit is in flight: the previous one is awaited before the next is
        prepared, so changelog offsets and store writes follow each other in order, and
        each checkpoint holds exactly the positions whose outputs and state it carries.
        """
        await self.settle()
        self._inflight = asyncio.ensure_future(self.write(self.prepare(instances)))
        if self._meta.atomic_commit:
            await self.settle()

    @property
    def in_flight(self) -> bool:
        """A commit is being written (`start` of the next one would wait for it)."""
        return self._inflight is not None and not self._inflight.done()

    @property
    def written(self) -> bool:
        """A commit in flight has finished (or failed): `settle` returns at once."""
        return self._inflight is not None and self._inflight.done()

    async def settle(self) -> None:
        """Wait for the commit in flight, if any; its error (e.g. fenced) is raised here."""
        inflight, self._inflight = self._inflight, None
        if inflight is not None:
            await inflight

    @property
    def epoch(self) -> int:
        """The epoch this worker's commits are written at (checked against the fence)."""
        return self._epoch

    async def retry_at(self, epoch: int, *, wait: bool = True) -> None:
        """Commit at ``epoch`` from now on (a newer model this worker took in place),
        writing again the commit the fence refused, if any: a refusal comes before the
        checkpoints are written, so nothing of it is lost or written twice. ``wait``
        False: the rewrite is the commit in flight (`settle` waits for it). A commit still
        in flight at the old epoch is refused by the same fence: kept and written again."""
        kept = self.refused is not None
        try:
            await self.settle()
        except FencedError:
            if kept or self.refused is None:
                raise  # not this commit's own refusal: the model moved on again
        self._epoch = epoch
        refused, self.refused = self.refused, None
        if refused is not None:
            log.info("writing again at epoch %d the commit the fence refused", epoch)
            self._inflight = asyncio.ensure_future(self.write(refused))
            if wait or self._meta.atomic_commit:
                await self.settle()

    async def abandon(self) -> None:
        """Let a commit in flight finish without raising (the worker is leaving anyway)."""
        inflight, self._inflight = self._inflight, None
        if inflight is not None:
            await asyncio.gather(inflight, return_exceptions=True)

    def _changelog_of(self, store: str) -> tuple[str, bool]:
        return self._config.changelog_ref(store).stream, store in self._config.logged_stores

    async def commit(self, instances: Sequence[TaskInstance]) -> None:
        """Write everything the instances produced since the last commit; then apply state."""
        await self.write(self.prepare(instances))

    def prepare(self, instances: Sequence[TaskInstance]) -> PreparedCommit:
        """Take what the instances produced, their stores' writes and their positions now
        (no I/O): the commit `write` makes durable. The instances go on collecting anew.

        The metadata system's records list the changelog records first: only their
        positions are needed (``CommitRequest.positions``), not one per output.
        """
        meta = self._config.metadata_system
        self.prepared += 1
        commit = PreparedCommit(list(instances), number=self.prepared)
        outputs: list[Outgoing] = []
        rows = self._row_systems
        for instance in instances:
            sent, raw = instance.take_outputs()
            commit.sent[instance.name] = (len(sent), len(raw))
            split = None
            if self._columns and sent:
                split = self._codec.encode_columns(sent, meta, rows)
                self._columns = split is not None
            if split is None:
                rest = self._codec.encode_rows(sent, rows)
            else:
                columns, rest = split
                commit.columns += columns
            for system, encoded in rest.items():
                (outputs if system == meta else commit.other[system]).extend(encoded)
            for system, record in raw:
                (outputs if system == meta else commit.other[system]).append(
                    producer_row(record) if system in rows else record)
            commit.inputs[instance.name] = dict(instance.positions)
            for name, store in instance.stores.items():
                items = store.drain()
                stream, logged = self._changelog_of(name)
                first = len(commit.changelog)
                if not logged:
                    commit.writes.append(_StoreWrites(instance, name, items, None, first))
                    continue
                partition = self._changelog_partition[instance.name]
                commit.writes.append(
                    _StoreWrites(instance, name, items, (stream, partition), first))
                if meta in rows:
                    commit.changelog.extend([(stream, key, value, partition, None, ())
                                             for key, value in items.items()])
                else:
                    commit.changelog.extend([producer_record(stream, key, value, partition,
                                                             None, ())
                                             for key, value in items.items()])
        commit.outputs = outputs
        return commit

    async def write(self, commit: PreparedCommit) -> None:
        """Make a prepared commit durable (outputs, changelog, checkpoints), then apply
        its store writes to the engines; the next `prepare` may run meanwhile. Refused
        by the fence: kept as `refused` (see `retry_at`), and `FencedError` raised."""
        try:
            await self._write(commit)
        except FencedError:
            self.refused = commit
            raise

    async def _write(self, commit: PreparedCommit) -> None:
        started = time.perf_counter()
        if not commit.other_written:
            for system, produced in commit.other.items():
                await _produce(self._systems[system], produced, 0)  # at-least-once
            commit.other_written = True
        records = commit.changelog + commit.outputs
        writes = commit.writes
        wanted = len(commit.changelog)  # positions of the changelog records only
        if self._meta.atomic_commit:
            predicted = self._predict(writes)
            landed = await self._meta.commit(CommitRequest(
                self._config.name, self._epoch, records,  # type: ignore[arg-type]
                self._checkpoints(commit, predicted), positions=wanted,
                columns=commit.columns))
        elif self._transactions is not None:
            def checkpoints(positions: list[RecordPosition]) -> list[Checkpoint]:
                return self._checkpoints(commit, self._actual(writes, positions))

            landed = await self._transactions.commit_transaction(
                self._config.name, self._epoch, cast(list[ProducerRow], records), checkpoints,
                wanted, commit.columns)
            predicted = self._actual(writes, landed)
        else:
            if commit.landed is not None:
                landed = commit.landed  # written before the fence refused the checkpoints
            elif commit.columns and self._meta_rows is not None:  # columns only go to one
                landed = await self._meta_rows.produce_rows(
                    cast(list[ProducerRow], records), positions=wanted, columns=commit.columns)
            else:
                landed = await _produce(self._meta, records, wanted) if records else []
            commit.landed = landed
            actual = self._actual(writes, landed)
            await self._meta.commit(CommitRequest(
                self._config.name, self._epoch, (), self._checkpoints(commit, actual)))
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
                map(len, commit.other.values())) + sum(len(c.keys) for c in commit.columns),
                commit.sent, [(w.instance.name, w.store, len(
                    w.items)) for w in writes if w.changelog is not None])
        for instance in commit.instances:
            instance.committed()
        self.commits += 1
        self.landed = max(self.landed, commit.number)

    def _predict(self, writes: list[_StoreWrites]) -> dict[tuple[str, str], int]:
        return {(w.instance.name, w.store): self.positions.get((w.instance.name, w.store), 0)
                + len(w.items) for w in writes if w.changelog is not None}

    def _actual(self, writes: list[_StoreWrites], landed: Sequence[RecordPosition]) -> dict[
        tuple[str, str], int
    ]:
        result = {}
        for w in writes:
            if w.changelog is None:
                continue
            key = (w.instance.name, w.store)
            if w.items:
                result[key] = landed[w.first + len(w.items) - 1].offset + 1
            else:
                result[key] = self.positions.get(key, 0)
        return result

    def _check(self, writes: list[_StoreWrites], landed: Sequence[RecordPosition],
               predicted: dict[tuple[str, str], int]) -> None:
        actual = self._actual(writes, landed)
        for key, offset in actual.items():
            if offset != predicted[key]:
                log.warning("changelog of store %s of task %s is at %d, expected %d; another "
                            "writer may share its partition", key[1], key[0], offset,
                            predicted[key])
                predicted[key] = offset

    def _checkpoints(self, commit: PreparedCommit,
                     changelogs: Mapping[tuple[str, str], int]) -> list[Checkpoint]:
        # Grouped in one pass: filtering every task's positions out of all of them made
        # each commit cost tasks² (`bench.curves tasks`).
        by_task: dict[str, dict[str, int]] = {}
        for (task, store), offset in changelogs.items():
            by_task.setdefault(task, {})[store] = offset
        return [
            Checkpoint(
                task=instance.name,
                epoch=self._epoch,
                inputs=commit.inputs[instance.name],
                changelogs=by_task.get(instance.name, {}),
            )
            for instance in commit.instances
        ]
