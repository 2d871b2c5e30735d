"""The System contract: one suite, run against the local log, real Apache Kafka and tansu.

Every test uses fresh stream names because the brokers live for the whole session. A
behaviour only some systems have is run on those only (``on(...)``), saying why.
"""

from __future__ import annotations

import itertools
import random
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiokafka.partitioner import DefaultPartitioner

from framework.errors import (
    FencedError,
    JobModelError,
    SampanError,
    StreamNotFoundError,
    UnsupportedOperation,
)
from framework.systems import open_system
from framework.systems.base import (
    Checkpoint,
    CommitRequest,
    OffsetRange,
    OffsetsByTime,
    ProducerRecord,
    Record,
    RecordPosition,
    System,
)
from groupers import SystemStreamPartition as SSP

SYSTEMS = ("local", "kafka", "tansu")


def on(*systems: str) -> pytest.MarkDecorator:
    """Run a test on ``systems`` only (the others lack the behaviour by design)."""
    return pytest.mark.parametrize("settings", systems, indirect=True)


class Settings:
    """A duck-typed ``[systems.<name>]`` config, as `open_system` reads it."""

    def __init__(self, name: str, type: str, path: Path | None = None,
                 bootstrap: str | None = None) -> None:
        self.name, self.type, self.path, self.bootstrap = name, type, path, bootstrap
        self.client_options: dict[str, Any] = {}


@pytest.fixture(params=SYSTEMS)
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    # Sync on purpose: the broker fixtures start their brokers with their own event loop.
    if request.param == "local":
        return Settings("local", "local", path=tmp_path / "log")
    broker = request.getfixturevalue(f"{request.param}_broker")
    return Settings("kafka", "kafka", bootstrap=broker.bootstrap)


@pytest.fixture
async def system(settings: Settings) -> AsyncIterator[System]:
    opened = open_system(settings)
    await opened.start()
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def name() -> str:
    """A stream name no other test uses."""
    return f"s-{uuid.uuid4().hex[:12]}"


async def read_all(
    system: System, positions: Mapping[SSP, int], expected: int, max_records: int = 1000
) -> dict[SSP, list[Record]]:
    """Fetch until ``expected`` records arrived (bounded number of polls)."""
    consumer = system.consumer()
    consumer.assign(positions)
    result: dict[SSP, list[Record]] = {ssp: [] for ssp in positions}
    try:
        for _ in range(100):
            if sum(len(r) for r in result.values()) >= expected:
                break
            batch = await consumer.fetch(max_records=max_records, timeout_ms=200)
            for ssp, records in batch.items():
                assert len(records) <= max_records
                result[ssp].extend(records)
    finally:
        await consumer.close()
    return result


def ssps(system: System, stream: str, count: int) -> dict[SSP, int]:
    return {SSP(system.name, stream, p): 0 for p in range(count)}


def kv(records: Sequence[Record]) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in records]


# -- streams -------------------------------------------------------------------------


async def test_created_streams_are_listed_with_their_partition_counts(
    system: System, name: str
) -> None:
    await system.create_stream(f"{name}-a", 3)
    await system.create_stream(f"{name}-b", 1, compacted=True)

    listed = await system.list_streams()
    assert {k: v for k, v in listed.items() if k.startswith(name)} == {
        f"{name}-a": 3, f"{name}-b": 1}
    assert await system.partition_counts([f"{name}-a", f"{name}-b"]) == {
        f"{name}-a": 3, f"{name}-b": 1}


async def test_creating_an_existing_stream_needs_exist_ok(system: System, name: str) -> None:
    await system.create_stream(name, 2)
    await system.create_stream(name, 2, exist_ok=True)
    with pytest.raises(SampanError, match=f"{name}.*already exists.*exist_ok"):
        await system.create_stream(name, 2)
    assert await system.partition_counts([name]) == {name: 2}


async def test_a_missing_stream_is_named_with_the_command_that_creates_it(
    system: System, name: str
) -> None:
    with pytest.raises(StreamNotFoundError) as error:
        await system.partition_counts([name])
    assert name in str(error.value)
    assert "sampan streams create" in str(error.value)
    with pytest.raises(StreamNotFoundError, match=name):
        await system.offsets(name)
    with pytest.raises(StreamNotFoundError, match=name):
        await system.produce([ProducerRecord(name, b"k", b"v")])


async def test_producing_to_a_partition_the_stream_lacks_fails(system: System, name: str) -> None:
    await system.create_stream(name, 2)
    with pytest.raises(StreamNotFoundError, match=f"partition 2 of stream '{name}'"):
        await system.produce([ProducerRecord(name, b"k", b"v", partition=2)])


async def test_a_stream_never_shrinks(system: System, name: str) -> None:
    await system.create_stream(name, 4)
    with pytest.raises(UnsupportedOperation, match=f"cannot shrink stream '{name}' from 4 to 2"):
        await system.expand_stream(name, 2)
    assert await system.partition_counts([name]) == {name: 4}


@on("local", "kafka")  # tansu has no CreatePartitions (tests/systems/kafka/test_kafka.py)
async def test_expansion_grows_the_stream_and_keeps_its_records(
    system: System, name: str
) -> None:
    await system.create_stream(name, 2)
    before = await system.produce([ProducerRecord(name, b"k%d" % i, b"v") for i in range(20)])

    await system.expand_stream(name, 4)

    assert await system.partition_counts([name]) == {name: 4}
    read = await read_all(system, ssps(system, name, 4), 20)
    stored = sorted((ssp.partition, r.offset) for ssp, rs in read.items() for r in rs)
    assert stored == sorted((p.partition, p.offset) for p in before)


# -- producing and consuming ---------------------------------------------------------


async def test_records_round_trip_with_keys_headers_timestamps_and_offsets(
    system: System, name: str
) -> None:
    await system.create_stream(name, 2)
    sent = [
        ProducerRecord(name, b"alice", b"1", partition=0, timestamp=1_000),
        ProducerRecord(name, b"bob", b"2", partition=1, timestamp=2_000,
                       headers=(("trace", b"t-1"), ("empty", b""))),
        ProducerRecord(name, None, b"3", partition=0, timestamp=3_000),
        ProducerRecord(name, b"alice", None, partition=0, timestamp=4_000),
    ]

    positions = await system.produce(sent)

    assert positions == [
        RecordPosition(name, 0, 0), RecordPosition(name, 1, 0),
        RecordPosition(name, 0, 1), RecordPosition(name, 0, 2),
    ]
    read = await read_all(system, ssps(system, name, 2), 4)
    assert read == {
        SSP(system.name, name, 0): [
            Record(0, 0, b"alice", b"1", 1_000),
            Record(0, 1, None, b"3", 3_000),
            Record(0, 2, b"alice", None, 4_000),
        ],
        SSP(system.name, name, 1): [
            Record(1, 0, b"bob", b"2", 2_000, (("trace", b"t-1"), ("empty", b""))),
        ],
    }


async def test_records_without_timestamp_get_the_current_time(system: System, name: str) -> None:
    await system.create_stream(name, 1)
    await system.produce([ProducerRecord(name, b"k", b"v")])
    (record,) = (await read_all(system, ssps(system, name, 1), 1))[SSP(system.name, name, 0)]
    assert record.timestamp > 1_600_000_000_000


async def test_records_without_key_go_round_robin(system: System, name: str) -> None:
    await system.create_stream(name, 3)
    positions = await system.produce([ProducerRecord(name, None, b"%d" % i) for i in range(6)])
    partitions = [p.partition for p in positions]
    assert [(b - a) % 3 for a, b in itertools.pairwise(partitions)] == [1] * 5
    assert sorted(partitions) == [0, 0, 1, 1, 2, 2]


async def test_every_key_lands_where_kafkas_default_partitioner_puts_it(
    system: System, name: str
) -> None:
    await system.create_stream(name, 7)
    rng = random.Random(7)
    keys = list({rng.randbytes(rng.randrange(1, 24)) for _ in range(1_000)})
    everything = list(range(7))
    expected = {key: DefaultPartitioner()(key, everything, everything) for key in keys}

    positions = await system.produce([ProducerRecord(name, key, b"v") for key in keys])

    assert {key: p.partition for key, p in zip(keys, positions, strict=True)} == expected
    read = await read_all(system, ssps(system, name, 7), len(keys))
    assert {r.key: ssp.partition for ssp, rs in read.items() for r in rs} == expected


async def test_a_consumer_reads_from_the_position_it_was_given(system: System, name: str) -> None:
    await system.create_stream(name, 1)
    await system.produce([ProducerRecord(name, b"k", b"%d" % i, partition=0) for i in range(10)])

    read = await read_all(system, {SSP(system.name, name, 0): 6}, 4)

    assert kv(read[SSP(system.name, name, 0)]) == [
        (6, b"k", b"6"), (7, b"k", b"7"), (8, b"k", b"8"), (9, b"k", b"9")]


async def test_fetch_returns_at_most_max_records_and_nothing_past_the_end(
    system: System, name: str
) -> None:
    await system.create_stream(name, 1)
    await system.produce([ProducerRecord(name, b"k", b"%d" % i, partition=0) for i in range(10)])
    consumer = system.consumer()
    consumer.assign({SSP(system.name, name, 0): 0})
    offsets: list[int] = []
    try:
        for _ in range(100):
            if len(offsets) == 10:
                break
            batch = await consumer.fetch(max_records=3, timeout_ms=200)
            for records in batch.values():
                assert 1 <= len(records) <= 3
                offsets.extend(r.offset for r in records)
        assert offsets == list(range(10))
        assert await consumer.fetch(max_records=3, timeout_ms=200) == {}
    finally:
        await consumer.close()


async def test_reading_a_partition_that_does_not_exist_yet_returns_nothing(
    system: System, name: str
) -> None:
    await system.create_stream(name, 1)
    consumer = system.consumer()
    consumer.assign({SSP(system.name, name, 5): 0, SSP(system.name, f"{name}-later", 0): 0})
    try:
        assert await consumer.fetch(timeout_ms=50) == {}
    finally:
        await consumer.close()


async def test_offsets_report_the_oldest_and_the_end_of_every_partition(
    system: System, name: str
) -> None:
    await system.create_stream(name, 3)
    assert await system.offsets(name) == {p: OffsetRange(0, 0) for p in range(3)}

    await system.produce([ProducerRecord(name, b"k", b"v", partition=0) for _ in range(5)]
                         + [ProducerRecord(name, b"k", b"v", partition=2) for _ in range(2)])

    assert await system.offsets(name) == {
        0: OffsetRange(0, 5), 1: OffsetRange(0, 0), 2: OffsetRange(0, 2)}


@on("local", "kafka")  # tansu answers ListOffsets by time with offset 0, whatever the time
async def test_offsets_for_time_give_the_first_record_stamped_at_or_after_it(
    system: System, name: str
) -> None:
    """Stamps 10, 20, 30, then 50, 40, 60, then 25 in partition 0 (producers' stamps need
    not grow); partition 1 stays empty. What a time start position reads from."""
    assert isinstance(system, OffsetsByTime)
    await system.create_stream(name, 2)
    for stamps in ([10, 20, 30], [50, 40, 60], [25]):
        await system.produce([ProducerRecord(name, b"k", b"v", partition=0, timestamp=t)
                              for t in stamps])
    found = {t: await system.offsets_for_time(name, t) for t in (0, 21, 45, 60, 61)}
    assert found == {0: {0: 0, 1: 0}, 21: {0: 2, 1: 0}, 45: {0: 3, 1: 0},
                     60: {0: 5, 1: 0}, 61: {0: 7, 1: 0}}  # none that late: the end


# -- commits, checkpoints, fences ----------------------------------------------------


def checkpoint(system: System, task: str, epoch: int, stream: str, offset: int) -> Checkpoint:
    return Checkpoint(task, epoch, {SSP(system.name, stream, 0): offset}, {"counts": offset * 2})


async def test_commit_writes_records_and_checkpoints(system: System, name: str) -> None:
    await system.create_stream(name, 2)
    job = f"job-{name}"
    cps = [checkpoint(system, "Partition 0", 1, "in", 10),
           checkpoint(system, "Partition 1", 1, "in", 20)]

    positions = await system.commit(CommitRequest(job, 1, [
        ProducerRecord(name, b"a", b"1", partition=0),
        ProducerRecord(name, b"b", b"2", partition=1),
        ProducerRecord(name, b"c", b"3", partition=1),
    ], cps))

    assert positions == [RecordPosition(name, 0, 0), RecordPosition(name, 1, 0),
                         RecordPosition(name, 1, 1)]
    assert await system.read_checkpoints(job) == {"Partition 0": cps[0], "Partition 1": cps[1]}
    read = await read_all(system, ssps(system, name, 2), 3)
    assert {ssp.partition: kv(rs) for ssp, rs in read.items()} == {
        0: [(0, b"a", b"1")], 1: [(0, b"b", b"2"), (1, b"c", b"3")]}


async def test_the_latest_checkpoint_of_a_task_wins(system: System, name: str) -> None:
    job = f"job-{name}"
    for offset in (5, 9, 7):
        await system.commit(CommitRequest(job, 1, (), [checkpoint(system, "t", 1, "in", offset)]))
    await system.commit(CommitRequest(job, 1, (), [checkpoint(system, "u", 1, "in", 1)]))

    assert await system.read_checkpoints(job) == {
        "t": checkpoint(system, "t", 1, "in", 7), "u": checkpoint(system, "u", 1, "in", 1)}
    assert await system.read_checkpoints(f"other-{name}") == {}


async def test_a_commit_of_an_older_epoch_than_the_fence_is_refused(
    system: System, name: str
) -> None:
    await system.create_stream(name, 1)
    job = f"job-{name}"
    await system.fence(job, 3)

    with pytest.raises(FencedError) as error:
        await system.commit(CommitRequest(job, 2, [ProducerRecord(name, b"k", b"late", 0)],
                                          [checkpoint(system, "t", 2, "in", 1)]))

    message = str(error.value)
    assert job in message and "epoch 2" in message and "epoch 3" in message
    assert "old job model" in message
    assert await system.read_checkpoints(job) == {}
    assert (await system.offsets(name))[0].end == 0
    await system.commit(CommitRequest(job, 3, (), [checkpoint(system, "t", 3, "in", 1)]))
    assert (await system.read_checkpoints(job))["t"].epoch == 3


async def test_only_the_current_epoch_commits(system: System, name: str) -> None:
    """Not "anything not newer": a model that never became current cannot commit either."""
    job = f"job-{name}"
    await system.fence(job, 3)
    with pytest.raises(FencedError, match="commit of epoch 4 refused, the job's current epoch "
                                          "is 3"):
        await system.commit(CommitRequest(job, 4, (), [checkpoint(system, "t", 4, "in", 2)]))
    with pytest.raises(FencedError, match="epoch 4"):
        await system.check_fence(job, 4)
    await system.check_fence(job, 3)
    assert await system.fenced_epoch(job) == 3
    await system.fence(job, 4)
    await system.commit(CommitRequest(job, 4, (), [checkpoint(system, "t", 4, "in", 2)]))
    assert (await system.read_checkpoints(job))["t"].epoch == 4
    with pytest.raises(FencedError, match="epoch 3 refused, the job is fenced at epoch 4"):
        await system.check_fence(job, 3)


async def test_advancing_the_fence_refuses_an_epoch_already_current(
        system: System, name: str) -> None:
    job = f"job-{name}"
    assert await system.fenced_epoch(job) is None
    await system.advance_fence(job, 1)
    await system.advance_fence(job, 2)
    with pytest.raises(JobModelError, match="cannot publish epoch 2, epoch 2 is already "
                                            "current; another coordinator"):
        await system.advance_fence(job, 2)
    assert await system.fenced_epoch(job) == 2


async def test_fencing_never_lowers_the_epoch(system: System, name: str) -> None:
    job = f"job-{name}"
    await system.fence(job, 5)
    await system.fence(job, 2)
    with pytest.raises(FencedError):
        await system.commit(CommitRequest(job, 4, (), [checkpoint(system, "t", 4, "in", 1)]))


@on("local")  # a Kafka commit is atomic only as a transaction: tests/eos
async def test_a_failed_commit_writes_nothing(system: System, name: str) -> None:
    assert system.atomic_commit
    await system.create_stream(name, 1)
    job = f"job-{name}"

    with pytest.raises(StreamNotFoundError):
        await system.commit(CommitRequest(job, 1, [
            ProducerRecord(name, b"k", b"v", partition=0),
            ProducerRecord(f"{name}-missing", b"k", b"v"),
        ], [checkpoint(system, "t", 1, "in", 1)]))

    assert (await system.offsets(name))[0].end == 0
    assert await system.read_checkpoints(job) == {}


# -- compaction ----------------------------------------------------------------------


@on("local")  # Kafka compacts in its own time; test_kafka checks cleanup.policy
async def test_compaction_keeps_the_latest_record_of_every_key(system: System, name: str) -> None:
    await system.create_stream(name, 1, compacted=True)
    await system.produce([ProducerRecord(name, key, value, partition=0) for key, value in [
        (b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", b"1"), (b"b", None), (b"a", b"3")]])

    assert await system.compact(name) == 3

    read = await read_all(system, ssps(system, name, 1), 3)
    assert kv(read[SSP(system.name, name, 0)]) == [(3, b"c", b"1"), (4, b"b", None),
                                                    (5, b"a", b"3")]
    assert await system.offsets(name) == {0: OffsetRange(3, 6)}


async def test_only_compacted_streams_can_be_compacted(system: System, name: str) -> None:
    await system.create_stream(name, 1)
    with pytest.raises(UnsupportedOperation, match=f"cannot compact stream '{name}'"):
        await system.compact(name)
