"""The System protocol: admin, consumer and producer over partitioned byte streams.

Systems move bytes; serdes live above them. Offsets follow Kafka's convention: the
offset of a record is its position in its partition, and a *position* (checkpointed
input offset, end offset) is the offset of the next record to read.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol, runtime_checkable

from groupers import SystemStreamPartition

__all__ = [
    "Checkpoint",
    "ColumnReader",
    "CommitRequest",
    "Consumer",
    "ConsumerGroups",
    "DeletesStreams",
    "FetchedRecord",
    "GrowthHistory",
    "GrowthRecorder",
    "HidesStreams",
    "OffsetRange",
    "OffsetsByTime",
    "OutputColumns",
    "ProducerRecord",
    "ProducerRow",
    "RawFetcher",
    "Record",
    "RecordPosition",
    "RowProducer",
    "StartsProducer",
    "System",
    "Transactional",
    "as_record",
    "fence_message",
    "producer_row",
]

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class Record:
    """A stored record as a consumer returns it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: Headers = ()


class FetchedRecord(Protocol):
    """What a worker reads of a fetched record: a `Record`, or a client's own record
    object with the same fields but the partition (`KafkaConsumer.fetch_raw`), so no
    copy is made per record. A header value may be None there (read as ``b""``)."""

    @property
    def offset(self) -> int: ...

    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes | None: ...

    @property
    def timestamp(self) -> int: ...

    @property
    def headers(self) -> Sequence[tuple[str, bytes | None]]: ...


def as_record(partition: int, fetched: FetchedRecord) -> Record:
    """``fetched`` of ``partition`` as a `Record` (itself when it is one)."""
    if type(fetched) is Record:
        return fetched
    headers = fetched.headers
    return Record(partition, fetched.offset, fetched.key, fetched.value, fetched.timestamp,
                  tuple((name, value or b"") for name, value in headers) if headers else ())


@dataclass(frozen=True, slots=True)
class ProducerRecord:
    """A record to write. ``partition=None`` means the Kafka default partitioner on ``key``."""

    stream: str
    key: bytes | None
    value: bytes | None
    partition: int | None = None
    timestamp: int | None = None
    headers: Headers = ()


ProducerRow = tuple[str, "bytes | None", "bytes | None", "int | None", "int | None", Headers]
"""A record to write as a plain tuple of `ProducerRecord`'s fields, in their order: what a
worker's commit hands to a system that takes rows (``produce_rows``), one tuple per
record instead of a frozen object."""


def producer_row(record: ProducerRecord) -> ProducerRow:
    """``record`` as a `ProducerRow`."""
    return (record.stream, record.key, record.value, record.partition, record.timestamp,
            record.headers)


class OutputColumns(NamedTuple):
    """Records of one stream as two columns, in the order sent: each with a bytes key
    (placed by the key's hash), a bytes or None value, no partition, timestamp or
    headers. How a worker's commit hands its outputs to a system with
    ``commit_columns`` (the local log, Kafka): no tuple per record on the way."""

    stream: str
    keys: list[bytes]
    values: list[bytes | None]


@dataclass(frozen=True, slots=True)
class RecordPosition:
    """Where a produced record landed."""

    stream: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """A partition's oldest retained offset and its end (next offset to be written)."""

    oldest: int
    end: int


@dataclass(frozen=True)
class Checkpoint:
    """A task's committed progress.

    ``inputs`` maps each input SSP to the next offset to read; ``changelogs`` maps each
    logged store to the changelog position its committed state reflects.
    """

    task: str
    epoch: int
    inputs: Mapping[SystemStreamPartition, int] = field(default_factory=dict)
    changelogs: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class CommitRequest:
    """Everything one commit writes: outputs, changelog records and checkpoints.

    A system with ``atomic_commit`` writes it all in one transaction and fails with
    `FencedError` when ``job``'s fenced epoch is newer than ``epoch``; others write the
    records first, then the checkpoints (at-least-once). ``positions`` is how many of the
    leading records' positions the caller needs (None: all); a system may return only
    those, sparing a `RecordPosition` per output. ``columns`` (only for a system with
    ``commit_columns``) are more records, written after ``records`` in the same
    transaction; none of their positions is returned.
    """

    job: str
    epoch: int
    records: Sequence[ProducerRecord] = ()
    checkpoints: Sequence[Checkpoint] = ()
    positions: int | None = None
    columns: Sequence[OutputColumns] = ()


class Consumer(Protocol):
    """Reads assigned partitions of a system from given positions."""

    def assign(self, positions: Mapping[SystemStreamPartition, int]) -> None:
        """Replace the assignment: read each SSP from the given position (next offset)."""
        ...

    def expect_partition_counts(self, counts: Mapping[str, int]) -> None:
        """The partition count of each stream (name in this system) the reader's job model
        was built for: a system that knows where a stream grew reads it only up to there
        (the local log); others ignore it."""
        ...

    async def fetch(
        self, max_records: int = 1000, timeout_ms: int = 100
    ) -> Mapping[SystemStreamPartition, Sequence[Record]]:
        """Up to ``max_records`` records past the current positions, waiting at most
        ``timeout_ms`` when none are available; positions advance past what is returned."""
        ...

    async def close(self) -> None:
        """Release the consumer's resources."""
        ...


@runtime_checkable
class ColumnReader(Protocol):
    """A system that reads a range of one partition as plain columns, without a `Record`
    per row (the local log): restores use it when it is there."""

    async def read_columns(
        self, stream: str, partition: int, start: int, end: int, limit: int
    ) -> tuple[list[int], list[bytes | None], list[bytes | None]]:
        """(offsets, keys, values) of up to ``limit`` records in ``[start, end)``."""
        ...


@runtime_checkable
class RawFetcher(Protocol):
    """A consumer that also hands out records without a copy per record (`fetch_raw`:
    Kafka's own records, the local log's decoded columns): a worker's path."""

    async def fetch_raw(
        self, max_records: int = 1000, timeout_ms: int = 100
    ) -> Mapping[SystemStreamPartition, Sequence[FetchedRecord]]:
        """`Consumer.fetch` as `FetchedRecord`s."""
        ...


@runtime_checkable
class EndsReader(Protocol):
    """A consumer that can say which of its partitions it has handed out up to their end
    now (Kafka: a ListOffsets of the last stable offsets), where a fetch that brings
    nothing of a partition does not mean it was read to its end (a client fetching ahead
    in the background). Expansion merges ask it (`framework.worker.merging`)."""

    async def read_to_end(
        self, ssps: Sequence[SystemStreamPartition]
    ) -> set[SystemStreamPartition]:
        """The partitions of ``ssps`` this consumer handed out everything of that a
        read_committed reader sees at the time of the call."""
        ...


@runtime_checkable
class RowProducer(Protocol):
    """A system that writes plain `ProducerRow`s and `OutputColumns` (the local log,
    Kafka): a worker's commit hands it those, here and in its `CommitRequest`, instead
    of a `ProducerRecord` per record."""

    async def produce_rows(self, rows: Sequence[ProducerRow], *,
                           positions: int | None = None,
                           columns: Sequence[OutputColumns] = ()) -> list[RecordPosition]:
        """`System.produce` of ``rows``, then of ``columns``; positions of rows only."""
        ...


@runtime_checkable
class Transactional(Protocol):
    """A system without atomic commits that runs ``guarantee = "exactly-once"`` with
    transactions (Kafka)."""

    @property
    def transactions(self) -> object | None:
        """The worker's transactional producer once `start_transactions` ran, else None."""
        ...

    async def start_transactions(self, job: str, worker: int) -> object:
        """Start worker ``worker``'s transactional producer, fencing its predecessor."""
        ...

    async def probe_transactions(self, job: str) -> None:
        """`UnsupportedOperation` (naming the broker's answer) unless it runs transactions."""
        ...

    async def commit_transaction(
        self, job: str, epoch: int, rows: Sequence[ProducerRow],
        checkpoints: Callable[[list[RecordPosition]], Sequence[Checkpoint]],
        positions: int | None = None, columns: Sequence[OutputColumns] = (),
    ) -> list[RecordPosition]:
        """``rows``, ``columns`` and ``checkpoints(the rows' positions)`` in one
        transaction, after a fence check; the first ``positions`` rows' positions."""
        ...


@runtime_checkable
class SettlesOffsets(Protocol):
    """A system whose stream ends can trail a finished commit for a moment (Kafka: a
    transaction's commit returns before the broker has written its markers)."""

    async def settled_offsets(self, stream: str) -> dict[int, OffsetRange]:
        """`System.offsets` once every commit that has returned is visible (bounded)."""
        ...


@runtime_checkable
class OffsetsByTime(Protocol):
    """A system that finds records by their timestamps (a job's time `start_position`,
    `sampan streams reset-offsets --to TIME`)."""

    async def offsets_for_time(self, stream: str, timestamp_ms: int) -> dict[int, int]:
        """Per partition of ``stream``, the offset of its first record stamped at or after
        ``timestamp_ms`` (ms since the epoch), or its end when none is."""
        ...


@runtime_checkable
class StartsProducer(Protocol):
    """A system whose producer connects on first use (Kafka): a coordinator connects it
    at start, so what the broker refuses is said once, there."""

    async def start_producer(self) -> object:
        """The system's producer, connected on the first call."""
        ...


@runtime_checkable
class ConsumerGroups(Protocol):
    """A system with consumer groups (Kafka): coordinators and hosts of a job are members
    of its groups, which tells a run whether another one is alive."""

    @property
    def bootstrap(self) -> str:
        """Where the system's brokers are, for messages."""
        ...

    def group_id(self, group: str) -> str:
        """``group`` (a job's group name) as the broker knows it: inside the namespace."""
        ...

    async def group_members(self, group: str) -> int | None:
        """How many members ``group`` (a job's group name) has now: 0 when it is empty or
        unknown, None when the broker's answer cannot be read."""
        ...


@dataclass(frozen=True)
class GrowthHistory:
    """One stream's partition history, read in one snapshot: its count now, where each
    partition ends now, and for each count it grew past, where each partition ended then."""

    count: int
    ends: Mapping[int, int]
    grown: Mapping[int, Mapping[int, int]]


@runtime_checkable
class DeletesStreams(Protocol):
    """A system that deletes streams (the local log; Kafka with DeleteTopics)."""

    async def delete_streams(self, streams: Sequence[str]) -> None:
        """Delete ``streams`` with all their records, and wait until the system no longer
        lists them; one that does not exist is skipped."""
        ...


@runtime_checkable
class HidesStreams(Protocol):
    """A system whose `System.list_streams` leaves some of its own streams out (Kafka: the
    checkpoints and fences topics)."""

    async def hidden_streams(self) -> dict[str, int]:
        """The streams `list_streams` leaves out: name → partition count."""
        ...


@runtime_checkable
class GrowthRecorder(Protocol):
    """A system that records where a stream's partitions ended at every growth (the local
    log); on others a refused partition change is only seen when it is detected."""

    async def growth_history(self, stream: str) -> GrowthHistory:
        """``stream``'s `GrowthHistory`; `StreamNotFoundError` when it does not exist."""
        ...


class System(Protocol):
    """One configured system (``[systems.<name>]``): the local log or a Kafka cluster."""

    name: str
    atomic_commit: bool

    async def start(self) -> None:
        """Connect (or open the database); idempotent."""
        ...

    async def close(self) -> None:
        """Disconnect; idempotent."""
        ...

    async def list_streams(self) -> dict[str, int]:
        """Every stream's name → partition count."""
        ...

    async def partition_counts(self, streams: Sequence[str]) -> dict[str, int]:
        """Partition counts of ``streams``; raises StreamNotFoundError for a missing one."""
        ...

    async def create_stream(
        self, stream: str, partitions: int, *, compacted: bool = False, exist_ok: bool = False
    ) -> None:
        """Create a stream; compacted streams keep only the latest record per key."""
        ...

    async def expand_stream(self, stream: str, partitions: int) -> None:
        """Grow a stream to ``partitions``; UnsupportedOperation where the broker cannot."""
        ...

    async def offsets(self, stream: str) -> dict[int, OffsetRange]:
        """Per partition: oldest retained offset and end offset."""
        ...

    def consumer(self) -> Consumer:
        """A new consumer with no assignment."""
        ...

    async def produce(self, records: Sequence[ProducerRecord], *,
                      positions: int | None = None) -> list[RecordPosition]:
        """Write records (outside any commit) and return where each landed, in order
        (only the first ``positions`` of them when given)."""
        ...

    async def commit(self, request: CommitRequest) -> list[RecordPosition]:
        """Write a commit (see `CommitRequest`); positions of ``request.records`` in order
        (at least the first ``request.positions`` of them)."""
        ...

    async def read_checkpoints(self, job: str) -> dict[str, Checkpoint]:
        """The latest checkpoint of every task of ``job``."""
        ...

    async def fence(self, job: str, epoch: int) -> None:
        """Record that ``job`` runs at ``epoch`` now (never lowering it); commits of any other
        epoch fail from then on."""
        ...

    async def fenced_epoch(self, job: str) -> int | None:
        """The job's current epoch, or None before its first job model."""
        ...

    async def advance_fence(self, job: str, epoch: int, *, in_place: bool = False,
                            gone: Collection[int] = ()) -> None:
        """Make ``epoch`` current; `JobModelError` unless it is above the current epoch.
        ``in_place``: the running workers take the new model without restarting, so
        nothing of theirs is fenced beyond the epoch (Kafka: their producers stay) —
        except the workers ``gone`` from the model (their producers are bumped)."""
        ...

    async def check_fence(self, job: str, epoch: int) -> None:
        """`FencedError` unless ``epoch`` is the job's current epoch (a worker asks this on
        its own schedule, so a stale worker stops without having to commit)."""
        ...

    async def compact(self, stream: str) -> int:
        """Drop superseded records of a compacted stream; returns how many were dropped."""
        ...


def fence_message(job: str, epoch: int, current: int) -> str:
    """Why a commit of ``epoch`` is refused while the job's current epoch is ``current``."""
    if epoch < current:
        return (f"job {job!r}: commit of epoch {epoch} refused, the job is fenced at epoch "
                f"{current}; this worker belongs to an old job model; it will be restarted")
    return (f"job {job!r}: commit of epoch {epoch} refused, the job's current epoch is "
            f"{current}; this worker's job model never became current (published by a "
            f"coordinator that lost its lease); it will be restarted")
