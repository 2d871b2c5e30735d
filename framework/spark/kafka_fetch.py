"""Bulk reads of one Kafka partition for Spark: our own large Fetch requests, batches to columns.

aiokafka's consumer builds a `ConsumerRecord` per record through a generator (~3 µs a
record here); a Spark read needs columns only, so this sends Fetch requests itself
(`FETCH_BYTES` per response) and turns each record batch straight into lists.

Reads are read_committed: the request asks the broker to filter, batches the broker lists
as aborted are dropped, and — for brokers that ignore the isolation level — a
transaction's batches are held until its COMMIT marker (dropped on ABORT). What is still
undecided at the last stable offset the broker reports (or at the partition's end) is not
visible.
"""

from __future__ import annotations

import asyncio
import struct
from collections import deque
from collections.abc import AsyncGenerator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import aiokafka.errors as kafka_errors
from aiokafka.client import AIOKafkaClient
from aiokafka.protocol.fetch import FetchRequest
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.structs import TopicPartition

from framework.errors import SystemUnavailableError
from framework.spark.arrow_columns import RecordColumns
from framework.systems.base import Headers
from framework.systems.kafka.diagnosis import diagnose
from framework.systems.kafka.system import KafkaSystem

__all__ = ["ABORT", "AVAILABLE", "COMMIT", "FETCH_BYTES", "CommittedBatches",
           "read_kafka_columns"]

FETCH_BYTES = 1 << 20
"""Most bytes one Fetch response carries for the partition (a batch larger still comes
whole): ~14,000 small records, an Arrow batch each, which Spark consumes while the next
is fetched (16 MB responses read 1M records ~2× slower)."""
MAX_WAIT_MS = 100
"""How long the broker may wait for data before answering a Fetch with nothing."""
ABORT, COMMIT = 0, 1  # the control record types of transaction markers
_READ_COMMITTED = 1
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_ATTEMPTS = 5

AVAILABLE = isinstance(FetchRequest, type) and hasattr(FetchRequest, "build")
"""Whether this aiokafka builds Fetch requests the way this module sends them (0.14 on);
otherwise Spark reads Kafka through the system's consumer."""


@dataclass
class _Txn:
    producer_id: int
    epoch: int
    decision: int | None = None  # None while open, then COMMIT or ABORT


class CommittedBatches:
    """One partition's read_committed view of its record batches, pushed in log order.

    A transaction's batches are held (with everything after them) until its marker;
    `push` appends what became readable to ``out``.
    """

    def __init__(self) -> None:
        self._held: deque[tuple[Sequence[Any], _Txn | None]] = deque()
        self._open: dict[int, _Txn] = {}
        self._broker_aborted: list[tuple[int, int]] = []  # (producer id, first offset)
        self._aborted: set[int] = set()

    @property
    def holding(self) -> bool:
        """Whether records wait for a transaction's decision."""
        return bool(self._held)

    def broker_aborted(self, aborted: Iterable[tuple[int, int]]) -> None:
        """The aborted transactions a read_committed Fetch response lists."""
        listed = {(int(producer), int(first)) for producer, first in aborted}
        self._broker_aborted = sorted({*self._broker_aborted, *listed},
                                      key=lambda entry: entry[1])

    def push(self, records: Sequence[Any], out: list[Any], *, base_offset: int,
             producer_id: int, epoch: int, transactional: bool,
             control: int | None = None) -> None:
        """Feed one batch: ``records`` of a data batch, or a marker (``control``)."""
        if producer_id >= 0:
            while self._broker_aborted and self._broker_aborted[0][1] <= base_offset:
                self._aborted.add(self._broker_aborted.pop(0)[0])
        if control is not None:
            if control == ABORT:
                self._aborted.discard(producer_id)
            txn = self._open.get(producer_id)
            if txn is not None and txn.epoch <= epoch:
                del self._open[producer_id]
                txn.decision = control
                self._release(out)
            return
        if not transactional or producer_id < 0:
            if self._held:
                self._held.append((records, None))
            else:
                out.extend(records)
            return
        if producer_id in self._aborted:
            return
        txn = self._open.get(producer_id)
        if txn is not None and txn.epoch < epoch:
            txn.decision = ABORT  # a newer epoch of the producer: the old transaction is dead
            txn = None
        if txn is None:
            txn = self._open[producer_id] = _Txn(producer_id, epoch)
        self._held.append((records, txn))
        self._release(out)

    def _release(self, out: list[Any]) -> None:
        held = self._held
        while held:
            records, txn = held[0]
            if txn is not None and txn.decision is None:
                return
            held.popleft()
            if txn is None or txn.decision == COMMIT:
                out.extend(records)


def _columns(records: Sequence[Any]) -> RecordColumns:
    headers: list[Headers] = [
        tuple((name, value or b"") for name, value in pairs) if pairs else ()
        for pairs in [r.headers for r in records]]
    return ([r.offset for r in records], [r.key for r in records],
            [r.value for r in records], [r.timestamp for r in records], headers)


class _Fetcher:
    """Fetch requests for one partition, with leader lookup and retries."""

    def __init__(self, system: KafkaSystem, stream: str, partition: int) -> None:
        self.system = system
        self.tp = TopicPartition(system.admin.topic(stream), partition)
        self.where = f"{system.name}.{stream}[{partition}] at {system.bootstrap}"
        self.timeout_s = system.options.timeout_s + MAX_WAIT_MS / 1000
        self.client = AIOKafkaClient(**system.options.client_kwargs(system.bootstrap))

    async def start(self) -> None:
        try:
            await asyncio.wait_for(self.client.bootstrap(), self.timeout_s)
        except (TimeoutError, kafka_errors.KafkaError, OSError) as error:
            problem = await diagnose(self.system.name, self.system.bootstrap,
                                     self.system.options)
            raise (problem or SystemUnavailableError(
                f"cannot read {self.where}: the broker did not answer ({error!r}); check "
                "that it runs and that [systems] bootstrap is right")) from error

    async def fetch(self, position: int) -> tuple[int, list[tuple[int, int]], bytes]:
        """(readable end, aborted transactions, record bytes) from ``position`` on; the
        readable end is the last stable offset where the broker reports one (Kafka: never
        past a transaction still open), else the high watermark."""
        failure: Any = None
        for attempt in range(_ATTEMPTS):
            if attempt:
                await asyncio.sleep(0.1 * 2 ** attempt)
                await asyncio.wait_for(self.client.force_metadata_update(), self.timeout_s)
            node = self.client.cluster.leader_for_partition(self.tp)
            if node is None or node < 0:
                failure = "no leader known"
                continue
            request = FetchRequest(MAX_WAIT_MS, 1, FETCH_BYTES, _READ_COMMITTED,
                                   [(self.tp.topic, [(self.tp.partition, position, FETCH_BYTES)])])
            try:
                response = await asyncio.wait_for(self.client.send(node, request), self.timeout_s)
            except (TimeoutError, kafka_errors.KafkaError) as error:
                failure = error
                continue
            for _topic, partitions in response.topics:
                for partition, code, highwater, *data in partitions:
                    if partition != self.tp.partition:
                        continue
                    error_type = kafka_errors.for_code(code)
                    if error_type is kafka_errors.NoError:
                        version = response.API_VERSION
                        aborted = data[2] if version >= 11 else data[-2] if version >= 4 else None
                        stable = data[0] if version >= 4 and data[0] >= 0 else highwater
                        return min(highwater, stable), list(aborted or ()), data[-1] or b""
                    refused = self.system.admin.refused(code, "READ", self.tp.topic,
                                                        f"reading {self.where}")
                    if refused is not None:
                        raise refused
                    if error_type is kafka_errors.OffsetOutOfRangeError:
                        raise SystemUnavailableError(
                            f"cannot read {self.where} from offset {position}: the broker no "
                            "longer has it (retention deleted it while reading); read again")
                    failure = error_type
                    if not getattr(error_type, "retriable", False):
                        raise SystemUnavailableError(
                            f"cannot read {self.where}: the broker answered "
                            f"{error_type.__name__}")
        raise SystemUnavailableError(
            f"cannot read {self.where} from offset {position} after {_ATTEMPTS} attempts "
            f"(last: {failure!r}); check the broker")

    async def close(self) -> None:
        await self.client.close()


async def read_kafka_columns(
    system: KafkaSystem, stream: str, partition: int, start: int, end: int
) -> AsyncGenerator[RecordColumns, None]:
    """The committed records of ``stream[partition]`` with ``start <= offset < end``, in
    chunks of one Fetch response each (offsets dropped by compaction are absent)."""
    if start >= end:
        return
    fetcher = _Fetcher(system, stream, partition)
    committed = CommittedBatches()
    position = start
    try:
        await fetcher.start()
        while position < end or committed.holding:
            readable_end, aborted, raw = await fetcher.fetch(position)
            committed.broker_aborted(aborted)
            records = MemoryRecords(raw)
            readable: list[Any] = []
            before = position
            while records.has_next() and (position < end or committed.holding):
                batch = records.next_batch()
                if batch.next_offset <= position:
                    continue
                # Old message formats (v0/v1) have no base offset, producer or epoch.
                pid = -1 if batch.producer_id is None else batch.producer_id
                base = getattr(batch, "base_offset", -1)
                epoch = getattr(batch, "producer_epoch", 0) or 0
                if batch.is_control_batch:
                    control = _CONTROL_KEY.unpack_from(next(batch).key)[1]
                    committed.push((), readable, base_offset=base, producer_id=pid, epoch=epoch,
                                   transactional=True, control=control)
                else:
                    rows = (list(batch) if base >= position
                            else [r for r in batch if r.offset >= position])
                    committed.push(rows, readable, base_offset=base, producer_id=pid,
                                   epoch=epoch, transactional=batch.is_transactional)
                position = batch.next_offset
            if readable and readable[-1].offset >= end:
                readable = [r for r in readable if r.offset < end]
            if readable:
                yield _columns(readable)
            if position == before and position >= readable_end:
                return  # the log's (stable) end: undecided transactions are not visible
    finally:
        await fetcher.close()
