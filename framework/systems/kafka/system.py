"""The kafka system: any Kafka-protocol cluster through aiokafka.

Tasks read with manual assignment (no consumer group), read_committed; records are
placed by sampan with the Kafka default partitioner, identically to the local system.
`commit` is at-least-once (``atomic_commit = False``): records are produced and
acknowledged, then the checkpoints are written to the compacted topic
``__sampan-<job>-checkpoints``. After `start_transactions` (``guarantee =
"exactly-once"``), `commit_transaction` writes a commit as one Kafka transaction
(`kafka.txn`).

Fencing: `fence` records the epoch in ``__sampan-<job>-fences`` and `commit` reads it
first (best effort: a commit that passed the check can still land); it also bumps the
epoch of every exactly-once worker's producer recorded there, which makes fencing exact
for transactional commits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import InvalidProducerEpoch, KafkaError, ProducerFenced

from framework.errors import (
    AuthorizationError,
    FencedError,
    JobModelError,
    SampanError,
    UnsupportedOperation,
)
from framework.logformat import notice_level
from framework.systems.base import (
    Checkpoint,
    CommitRequest,
    OffsetRange,
    OutputColumns,
    ProducerRecord,
    ProducerRow,
    RecordPosition,
    fence_message,
    producer_row,
)
from framework.systems.checkpoint_json import checkpoint_from_json, checkpoint_to_json
from framework.systems.kafka.admin import UNREACHABLE, KafkaAdmin
from framework.systems.kafka.aiokafka_private import transaction_error
from framework.systems.kafka.consumer import KafkaConsumer
from framework.systems.kafka.denials import DENIALS
from framework.systems.kafka.fencing import fence_producer
from framework.systems.kafka.options import KafkaOptions
from framework.systems.kafka.produce import (
    KafkaPlacement,
    positions_of,
    send_rows,
    stop_producer,
    streams_of,
)
from framework.systems.kafka.table import TopicTable
from framework.systems.kafka.txn import (
    PRODUCER_PREFIX,
    KafkaTransactions,
    decode_identity,
    encode_identity,
    probe_transactions,
    transactional_id,
)

__all__ = ["KafkaSystem", "checkpoints_topic", "fences_topic"]

log = logging.getLogger(__name__)

_EPOCH_KEY = b"epoch"
_META_PREFIX = "__sampan-"


def _is_internal(topic: str) -> bool:
    """The system's own checkpoint and fence topics, hidden from `list_streams`."""
    return topic.startswith(_META_PREFIX) and topic.endswith(("-checkpoints", "-fences"))


@contextlib.contextmanager
def _quiet(logger: str) -> Iterator[None]:
    """Silence one library logger below CRITICAL for the duration (what it would say is
    reported by sampan itself, once)."""
    target = logging.getLogger(logger)
    level = target.level
    target.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        target.setLevel(level)


def checkpoints_topic(job: str) -> str:
    """The compacted topic holding ``job``'s checkpoints, keyed by task name."""
    return f"{_META_PREFIX}{job}-checkpoints"


def fences_topic(job: str) -> str:
    """The compacted topic holding ``job``'s fenced epoch."""
    return f"{_META_PREFIX}{job}-fences"


class KafkaSystem:
    """A `System` over the Kafka cluster at ``bootstrap``; connects on first use."""

    atomic_commit = False
    commit_columns = True  # a worker's outputs as `OutputColumns` (`produce_rows`, transactions)

    def __init__(
        self, name: str, bootstrap: str, options: Mapping[str, Any] | KafkaOptions | None = None,
        *, root: Path | None = None,
    ) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.options = (
            options if isinstance(options, KafkaOptions)
            else KafkaOptions.from_mapping(name, options or {}, root)
        )
        self.admin = KafkaAdmin(name, bootstrap, self.options)
        self._producer: AIOKafkaProducer | None = None
        self._placement = KafkaPlacement(name)
        self._tables: dict[str, TopicTable] = {}
        self._meta_topics: set[str] = set()
        self._unchecked: set[str] = set()  # streams whose cleanup.policy we may not read
        self._start_lock = asyncio.Lock()
        self.transactions: KafkaTransactions | None = None

    def __repr__(self) -> str:
        return f"KafkaSystem({self.name!r}, {self.bootstrap!r})"

    async def start(self) -> None:
        """Connect the admin client; the producer connects when first needed
        (`start_producer`), so commands that only read never ask for one."""
        await self.admin.start()

    async def start_producer(self) -> AIOKafkaProducer:
        """The system's producer, connected on the first call (a broker refusing the
        idempotent producer is reported then: a job's coordinator calls this at start)."""
        async with self._start_lock:
            if self._producer is None:
                await self.admin.start()
                self._producer = await self._start_producer()
            return self._producer

    async def _start_producer(self) -> AIOKafkaProducer:
        kwargs = self.options.client_kwargs(self.bootstrap)
        batch = self.options.producer_batch_kb << 10
        kwargs.update(max_batch_size=batch, max_request_size=max(batch, 1 << 20))
        if self.options.enable_idempotence is not False:
            producer = AIOKafkaProducer(acks="all", enable_idempotence=True, **kwargs)
            try:
                # A broker refusing InitProducerId is answered below (fallback or error);
                # aiokafka would also log it as an ERROR of its own.
                with _quiet("aiokafka.producer.sender"):
                    await self.admin.connect(producer.start())
                return producer
            except KafkaError as exc:
                await producer.stop()
                if isinstance(exc, UNREACHABLE):
                    raise self.admin.unavailable("connect", exc) from exc
                if self.options.enable_idempotence:
                    raise UnsupportedOperation(
                        f"idempotent producer (InitProducerId): the broker at {self.bootstrap} "
                        f"refused it ({type(exc).__name__}); set enable_idempotence = false in "
                        f"[systems.{self.name}.client_options]"
                    ) from exc
                log.log(
                    notice_level(),
                    "Kafka at %s refused the idempotent producer (%s); producing with "
                    "acks=all only, so a retried send may duplicate a record",
                    self.bootstrap, type(exc).__name__,
                )
        producer = AIOKafkaProducer(acks="all", **kwargs)
        try:
            await self.admin.connect(producer.start())
        except BaseException:
            await producer.stop()
            raise
        return producer

    async def close(self) -> None:
        """Close every client; bounded, so a broker that does not answer never holds a
        worker that is stopping or riding out an outage."""
        transactions, self.transactions = self.transactions, None
        if transactions is not None:
            await transactions.close()
        for table in self._tables.values():
            await table.close()
        self._tables.clear()
        producer, self._producer = self._producer, None
        if producer is not None:
            await stop_producer(producer, self.options.timeout_s)
        await self.admin.close()

    # -- admin ------------------------------------------------------------------------

    async def list_streams(self) -> dict[str, int]:
        counts = await self.admin.topic_counts()
        return {t: n for t, n in sorted(counts.items()) if not _is_internal(t)}

    async def partition_counts(self, streams: Sequence[str]) -> dict[str, int]:
        return await self.admin.partition_counts(list(streams))

    async def hidden_streams(self) -> dict[str, int]:
        """The checkpoint and fence topics `list_streams` leaves out: sampan's own."""
        counts = await self.admin.topic_counts()
        return {t: n for t, n in sorted(counts.items()) if _is_internal(t)}

    async def delete_streams(self, streams: Sequence[str]) -> None:
        """DeleteTopics of ``streams`` (`DeletesStreams`)."""
        await self.admin.delete_streams(streams)

    async def create_stream(
        self, stream: str, partitions: int, *, compacted: bool = False, exist_ok: bool = False
    ) -> None:
        await self.admin.create_stream(stream, partitions, compacted, exist_ok)

    async def expand_stream(self, stream: str, partitions: int) -> None:
        await self.admin.expand_stream(stream, partitions)

    async def offsets(self, stream: str) -> dict[int, OffsetRange]:
        return await self.admin.offsets(stream)

    async def offsets_for_time(self, stream: str, timestamp_ms: int) -> dict[int, int]:
        """Per partition, the first record stamped at or after ``timestamp_ms``, else the
        end (`framework.systems.base.OffsetsByTime`)."""
        return await self.admin.offsets_for_time(stream, timestamp_ms)

    async def settled_offsets(self, stream: str) -> dict[int, OffsetRange]:
        """`offsets` after waiting (at most ``timeout_s``) for the markers of transactions
        that have committed or aborted: what a check of finished work reads up to."""
        return await self.admin.offsets(stream, settle_s=self.options.timeout_s)

    def consumer(self) -> KafkaConsumer:
        return KafkaConsumer(self.admin)

    async def compact(self, stream: str) -> int:
        """Check ``stream`` is compacted; the broker compacts in the background, so
        nothing is dropped on demand and the result is always 0."""
        await self.admin.partition_counts([stream])
        if stream in self._unchecked:
            return 0
        try:
            policy = await self.admin.cleanup_policy(stream)
        except AuthorizationError as error:
            self._unchecked.add(stream)
            log.info("%s; not checking that %s is compacted any more (the broker compacts "
                     "it if its cleanup.policy is compact, as sampan creates it)",
                     error, stream)
            return 0
        if "compact" not in policy:
            raise UnsupportedOperation(
                f"cannot compact stream {stream!r}: its cleanup.policy is {policy!r}, not "
                "compact; only changelog and metadata streams are compacted"
            )
        return 0

    # -- producing and committing -----------------------------------------------------

    async def produce(self, records: Sequence[ProducerRecord], *,
                      positions: int | None = None) -> list[RecordPosition]:
        return await self.produce_rows([producer_row(r) for r in records], positions=positions)

    async def produce_rows(self, rows: Sequence[ProducerRow], *,
                           positions: int | None = None,
                           columns: Sequence[OutputColumns] = ()) -> list[RecordPosition]:
        """`produce` of plain tuples, then of ``columns`` (a worker's commit): no object
        per record; positions of rows only."""
        if not rows and not columns:
            return []
        return await self.send_rows(await self.start_producer(), rows, positions, columns)

    async def send_records(self, producer: AIOKafkaProducer, records: Sequence[ProducerRecord],
                           positions: int | None = None) -> list[RecordPosition]:
        """`send_rows` of `ProducerRecord`s."""
        return await self.send_rows(producer, [producer_row(r) for r in records], positions)

    async def send_rows(self, producer: AIOKafkaProducer, rows: Sequence[ProducerRow],
                        positions: int | None = None,
                        columns: Sequence[OutputColumns] = ()) -> list[RecordPosition]:
        """Send ``rows``, then ``columns``, with ``producer`` and wait for their
        acknowledgements; returns where each row landed (only the first ``positions``
        when given)."""
        if not rows and not columns:
            return []
        streams = sorted({*streams_of(rows), *(output.stream for output in columns)})
        counts = await self.admin.partition_counts(streams, self.options.metadata_max_age_s)
        for stream in streams:
            known = await self.admin.bounded("metadata",
                                             producer.partitions_for(self.admin.topic(stream)))
            if len(known) < counts[stream]:  # grown since the producer last looked
                await self.admin.bounded("metadata", producer.client.force_metadata_update())
        # Whole batches per partition (not one `send` per record): far fewer event-loop
        # round trips and produce requests, and the offsets follow from each base offset.
        sent, wanted = await send_rows(producer, rows, counts, self._placement,
                                       self.admin.bounded, positions, columns,
                                       self.options.namespace)
        try:
            landed = await self.admin.bounded(
                "produce acknowledgement (records may still be written)",
                asyncio.gather(*(future for _, _, future, _ in sent)),
            )
        except (ProducerFenced, InvalidProducerEpoch):
            raise  # a transaction's producer was fenced: `kafka.txn` says so
        except KafkaError as exc:
            cause = transaction_error(producer) or exc  # AddPartitionsToTxn's own answer
            if isinstance(cause, DENIALS):
                raise self.admin.denial(cause, "WRITE", self.admin.topic(streams[0]),
                                        "producing records") from exc
            if exc.retriable:
                raise self.admin.transient(f"producing to {streams}", exc) from exc
            raise SampanError(
                f"Kafka at {self.bootstrap} refused records for {streams}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        return positions_of(sent, landed, wanted)

    async def commit(self, request: CommitRequest) -> list[RecordPosition]:
        """Check the fence, produce the records, then the checkpoints (at-least-once)."""
        await self._check_fence(request.job, request.epoch)
        positions = await self.produce(request.records)
        if request.checkpoints:
            topic = await self._meta_topic(checkpoints_topic(request.job))
            await self.produce([
                ProducerRecord(topic, cp.task.encode(), checkpoint_to_json(cp).encode(), 0)
                for cp in request.checkpoints
            ])
        return positions

    def group_id(self, group: str) -> str:
        """``group`` as the broker knows it: inside the namespace."""
        return self.options.named(group)

    async def group_members(self, group: str) -> int | None:
        """How many members ``group`` (inside the namespace) has now (`KafkaAdmin`)."""
        return await self.admin.group_members(self.group_id(group))

    async def start_transactions(self, job: str, worker: int) -> KafkaTransactions:
        """Start worker ``worker``'s transactional producer (fencing its predecessor);
        `UnsupportedOperation` naming the broker's answer when it has no transactions."""
        await self.start()
        if self.transactions is None:
            transactions = KafkaTransactions(self, job, worker)
            await transactions.start()
            self.transactions = transactions
        return self.transactions

    async def probe_transactions(self, job: str) -> None:
        """`UnsupportedOperation` (naming the broker's answer) unless it runs transactions."""
        await self.start()
        await probe_transactions(self, job)

    async def commit_transaction(
        self, job: str, epoch: int, rows: Sequence[ProducerRow],
        checkpoints: Callable[[list[RecordPosition]], Sequence[Checkpoint]],
        positions: int | None = None, columns: Sequence[OutputColumns] = (),
    ) -> list[RecordPosition]:
        """Check the fence, then write ``rows``, ``columns`` and ``checkpoints(the rows'
        positions)`` as one transaction (after `start_transactions`); only the first
        ``positions`` rows' positions are returned and given to ``checkpoints`` when it
        is set."""
        if self.transactions is None:
            raise SampanError(f"{self!r}: commit_transaction before start_transactions")
        await self._check_fence(job, epoch)
        return await self.transactions.commit(rows, checkpoints, positions, columns)

    async def checkpoints_stream(self, job: str) -> str:
        """``job``'s checkpoints topic, created if missing."""
        return await self._meta_topic(checkpoints_topic(job))

    async def fences_table(self, job: str) -> dict[bytes, bytes | None]:
        """The latest value of every key of ``job``'s fences topic."""
        return await self._table(fences_topic(job)).refresh()

    async def write_fence_record(self, job: str, key: bytes, value: bytes) -> None:
        topic = await self._meta_topic(fences_topic(job))
        await self.produce([ProducerRecord(topic, key, value, 0)])

    async def read_checkpoints(self, job: str) -> dict[str, Checkpoint]:
        latest = await self._table(checkpoints_topic(job)).refresh()
        return {
            task.decode(): checkpoint_from_json(value)
            for task, value in sorted(latest.items())
            if value is not None
        }

    async def fence(self, job: str, epoch: int) -> None:
        await self._write_epoch(job, epoch)
        await self._fence_producers(job)

    async def _write_epoch(self, job: str, epoch: int) -> None:
        """Record ``epoch`` in the fences topic unless it holds that epoch or a newer one."""
        topic = await self._meta_topic(fences_topic(job))
        stored = await self._fenced_epoch(job)
        if stored is None or stored < epoch:
            await self.produce([ProducerRecord(topic, _EPOCH_KEY, str(epoch).encode(), 0)])

    async def _fence_producers(self, job: str, only: frozenset[int] | None = None) -> None:
        """Bump every recorded exactly-once producer of ``job`` (or of the workers
        ``only``): after the new epoch is written, no worker of an older model can commit
        a transaction."""
        for key, value in sorted((await self.fences_table(job)).items()):
            if not key.startswith(PRODUCER_PREFIX) or value is None:
                continue
            worker = int(key[len(PRODUCER_PREFIX):])
            if only is not None and worker not in only:
                continue
            producer = await self.start_producer()
            bumped = await self.admin.bounded("fencing producers", fence_producer(
                producer.client, self.options.named(transactional_id(job, worker)),
                decode_identity(value)))
            if bumped is not None:
                await self.write_fence_record(job, key, encode_identity(bumped))

    async def _check_fence(self, job: str, epoch: int) -> None:
        stored = await self._fenced_epoch(job)
        if stored is not None and stored != epoch:
            raise FencedError(fence_message(job, epoch, stored))

    async def check_fence(self, job: str, epoch: int) -> None:
        """`FencedError` unless ``epoch`` is the job's current epoch."""
        await self._check_fence(job, epoch)

    async def fenced_epoch(self, job: str) -> int | None:
        return await self._fenced_epoch(job)

    async def advance_fence(self, job: str, epoch: int, *, in_place: bool = False,
                            gone: Collection[int] = ()) -> None:
        """Make ``epoch`` current, refusing one not above the current epoch. Not atomic on
        Kafka (read, then write): it catches a second publisher, it cannot exclude one.
        ``in_place``: the workers go on as the new model's (same ``transactional.id``s), so
        their producers are not bumped; a commit still checks the epoch first."""
        stored = await self._fenced_epoch(job)
        if stored is not None and stored >= epoch:
            raise JobModelError(
                f"job {job!r}: cannot publish epoch {epoch}, epoch {stored} is already "
                f"current; another coordinator is running this job — stop it first")
        if in_place:
            await self._write_epoch(job, epoch)
            if gone:
                await self._fence_producers(job, only=frozenset(gone))
        else:
            await self.fence(job, epoch)

    async def _fenced_epoch(self, job: str) -> int | None:
        value = (await self._table(fences_topic(job)).refresh()).get(_EPOCH_KEY)
        return None if value is None else int(value)

    def _table(self, topic: str) -> TopicTable:
        if topic not in self._tables:
            self._tables[topic] = TopicTable(self.admin, topic)
        return self._tables[topic]

    async def _meta_topic(self, topic: str) -> str:
        if topic not in self._meta_topics:
            await self.admin.create_stream(topic, 1, compacted=True, exist_ok=True)
            self._meta_topics.add(topic)
        return topic
