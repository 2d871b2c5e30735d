"""Exactly-once commits on Kafka: one transactional producer per worker.

`KafkaTransactions.start` starts a producer whose ``transactional.id`` is
``sampan-<job>-worker-<id>``: its InitProducerId fences the worker's previous incarnation
(Kafka bumps the epoch and aborts the transaction it left open), and records its producer
id and epoch in the job's fences topic under ``producer/<worker>``, for a newer job model
to fence it in turn (`KafkaSystem.fence`). `KafkaTransactions.commit` writes one commit —
outputs, changelog records, then the checkpoints carrying the changelog offsets those
records got — as one transaction.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from aiokafka import AIOKafkaProducer
from aiokafka.errors import (
    IllegalOperation,
    InvalidProducerEpoch,
    KafkaError,
    ProducerFenced,
    TransactionalIdAuthorizationFailed,
)

from framework.errors import FencedError, SampanError, UnsupportedOperation
from framework.systems.base import (
    Checkpoint,
    OutputColumns,
    ProducerRecord,
    ProducerRow,
    RecordPosition,
)
from framework.systems.checkpoint_json import checkpoint_to_json
from framework.systems.kafka.admin import KafkaAdmin
from framework.systems.kafka.aiokafka_private import transaction_error, txn_manager
from framework.systems.kafka.denials import DENIALS
from framework.systems.kafka.fencing import ProducerIdentity
from framework.systems.kafka.options import KafkaOptions
from framework.systems.kafka.produce import stop_producer

__all__ = [
    "PRODUCER_PREFIX",
    "KafkaTransactions",
    "TransactionHost",
    "probe_transactions",
    "start_transactional_producer",
    "transactional_id",
]

log = logging.getLogger(__name__)

PRODUCER_PREFIX = b"producer/"
"""Key prefix, in the fences topic, of each worker's producer id and epoch."""

_FENCED = (ProducerFenced, InvalidProducerEpoch, TransactionalIdAuthorizationFailed)

INIT_TIMEOUT_S = 30.0
"""Least bound on InitProducerId: a cluster's first transactional producer makes it create
its transaction log, and a broker just back from an outage loads that log first."""


class TransactionHost(Protocol):
    """What transactions use of the system that owns them (`KafkaSystem`): its client
    options, its admin, and its sends into topics it creates on demand."""

    @property
    def name(self) -> str: ...

    @property
    def bootstrap(self) -> str: ...

    @property
    def options(self) -> KafkaOptions: ...

    @property
    def admin(self) -> KafkaAdmin: ...

    async def send_rows(self, producer: AIOKafkaProducer, rows: Sequence[ProducerRow],
                        positions: int | None = None,
                        columns: Sequence[OutputColumns] = ()) -> list[RecordPosition]: ...

    async def send_records(self, producer: AIOKafkaProducer, records: Sequence[ProducerRecord],
                           positions: int | None = None) -> list[RecordPosition]: ...

    async def checkpoints_stream(self, job: str) -> str: ...

    async def write_fence_record(self, job: str, key: bytes, value: bytes) -> None: ...


def transactional_id(job: str, worker: int) -> str:
    """The ``transactional.id`` of worker ``worker`` of ``job``: stable across restarts,
    so a restarted worker takes over (and fences) its predecessor."""
    return f"sampan-{job}-worker-{worker}"


def encode_identity(identity: ProducerIdentity) -> bytes:
    return f"{identity[0]}:{identity[1]}".encode()


def decode_identity(value: bytes) -> ProducerIdentity:
    producer_id, _, epoch = value.decode().partition(":")
    return int(producer_id), int(epoch)


async def start_transactional_producer(system: TransactionHost, txn_id: str) -> AIOKafkaProducer:
    """A started producer with ``transactional.id`` ``txn_id``; `UnsupportedOperation`
    naming the broker's answer and the fix when the broker has no transactions."""
    kwargs = system.options.client_kwargs(system.bootstrap)
    batch = system.options.producer_batch_kb << 10
    producer = AIOKafkaProducer(
        acks="all", enable_idempotence=True, transactional_id=txn_id,
        transaction_timeout_ms=int(system.options.transaction_timeout_s * 1000),
        max_batch_size=batch, max_request_size=max(batch, 1 << 20), **kwargs)
    try:
        await system.admin.bounded("InitProducerId (transactions)", producer.start(),
                                   max(INIT_TIMEOUT_S, system.options.timeout_s))
    except SampanError:  # no answer at all: SystemUnavailableError says so
        await producer.stop()
        raise
    except DENIALS as exc:
        await producer.stop()
        raise system.admin.denial(exc, "WRITE", txn_id,
                                  "starting a transactional producer (exactly-once)") from exc
    except KafkaError as exc:
        await producer.stop()
        raise UnsupportedOperation(
            f'[job] guarantee = "exactly-once" needs Kafka transactions, and the broker at '
            f"{system.bootstrap} (system {system.name!r}) refused them "
            f"({type(exc).__name__}: {exc}); run the job on a broker with transactions "
            f'(Kafka 2.5 or later), or set [job] guarantee = "at-least-once"'
        ) from exc
    return producer


async def probe_transactions(system: TransactionHost, job: str) -> None:
    """Check that the broker runs transactions (for a coordinator's start-up check)."""
    producer = await start_transactional_producer(system,
                                                  system.options.named(f"sampan-{job}-probe"))
    await producer.stop()


def _lost_broker(error: BaseException) -> bool:
    """Whether ``error`` or what caused it is a retriable broker error (a connection lost,
    a leader or coordinator gone): aiokafka's sender wraps such an error met while
    committing in a plain ``KafkaError("Unexpected error during batch delivery")``."""
    seen: BaseException | None = error
    for _ in range(10):
        if seen is None:
            return False
        if isinstance(seen, KafkaError) and seen.retriable:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class KafkaTransactions:
    """The transactional producer of one worker of ``job`` on ``system``."""

    def __init__(self, system: TransactionHost, job: str, worker: int) -> None:
        self._system = system
        self.job = job
        self.worker = worker
        self.transactional_id = system.options.named(transactional_id(job, worker))
        self._producer: AIOKafkaProducer | None = None

    async def start(self) -> None:
        """Refuse brokers without transactions, start (InitProducerId with this worker's
        ``transactional.id`` fences its previous incarnation: the broker aborts or
        completes what it left open first), then record the producer's id and epoch
        for a newer job model to fence (`KafkaSystem.fence`)."""
        system = self._system
        producer = await start_transactional_producer(system, self.transactional_id)
        self._producer = producer
        try:
            manager = txn_manager(producer)
            identity = (manager.producer_id, manager.producer_epoch)
            key = PRODUCER_PREFIX + str(self.worker).encode()
            await system.write_fence_record(self.job, key, encode_identity(identity))
        except BaseException:
            await self.close()
            raise
        log.info("transactional producer %s started (producer id %d, epoch %d)",
                 self.transactional_id, *identity)

    async def _fenced(self, error: BaseException) -> bool:
        """Whether a failed commit failed because this producer was fenced; aborts the
        transaction if it is still open (EndTxn is refused to a fenced producer, which is
        also how fencing shows when the broker answered a produce with another error)."""
        fenced = isinstance(error, _FENCED) or isinstance(error.__cause__, _FENCED)
        producer = self._producer
        manager = txn_manager(producer) if producer is not None else None
        if manager is not None and manager.is_fatal_error():
            # aiokafka's sender hit the fence (e.g. on AddPartitionsToTxn) and keeps the
            # error on the transaction's waiter.
            waiter = manager.wait_for_transaction_end()
            if waiter.done() and not waiter.cancelled():
                fenced = fenced or isinstance(waiter.exception(), _FENCED)
        if producer is not None and manager is not None and manager.is_in_transaction():
            try:
                await asyncio.wait_for(producer.abort_transaction(),
                                       self._system.options.timeout_s)
            except _FENCED:
                fenced = True
            except (KafkaError, TimeoutError):
                pass  # gone: the broker's timeout or the next owner aborts it
        return fenced

    async def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await stop_producer(producer, self._system.options.timeout_s)

    async def commit(
        self, rows: Sequence[ProducerRow],
        checkpoints: Callable[[list[RecordPosition]], Sequence[Checkpoint]],
        positions: int | None = None, columns: Sequence[OutputColumns] = (),
    ) -> list[RecordPosition]:
        """One transaction: ``rows`` and ``columns``, then ``checkpoints(positions of the
        first ``positions`` rows, or of all)``."""
        producer = self._producer
        if producer is None:
            raise SampanError(f"{self.transactional_id}: commit before start(); call "
                              "KafkaSystem.start_transactions first")
        system = self._system
        try:
            await system.admin.bounded("begin transaction", producer.begin_transaction())
            landed = await system.send_rows(producer, rows, positions, columns)
            written = checkpoints(landed)
            if written:
                topic = await system.checkpoints_stream(self.job)
                await system.send_records(producer, [
                    ProducerRecord(topic, cp.task.encode(), checkpoint_to_json(cp).encode(), 0)
                    for cp in written])
            await system.admin.bounded("commit transaction",
                                       asyncio.shield(producer.commit_transaction()))
        except BaseException as exc:
            failure = exc if isinstance(exc, DENIALS) else transaction_error(producer)
            if isinstance(failure, DENIALS):  # AddPartitionsToTxn's answer, or the commit's
                raise system.admin.denial(failure, "WRITE", self.transactional_id,
                                          "a transaction of exactly-once") from exc
            if await self._fenced(exc):
                raise FencedError(
                    f"job {self.job!r}: worker {self.worker}'s transactional producer "
                    f"{self.transactional_id!r} was fenced (a newer incarnation of this worker "
                    "or a newer job model took over); nothing of this commit is visible; the "
                    "worker stops and will be restarted") from exc
            if _lost_broker(exc):
                raise system.admin.transient(
                    f"the transaction of {self.transactional_id!r}", exc) from exc
            if isinstance(exc, KafkaError | IllegalOperation):
                raise SampanError(
                    f"Kafka at {system.bootstrap} failed the transaction of "
                    f"{self.transactional_id!r}: {type(exc).__name__}: {exc}; nothing of this "
                    "commit is visible; restart the worker") from exc
            raise
        return landed
