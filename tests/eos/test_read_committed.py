"""Transactions on real Apache Kafka, as sampan relies on them: the broker serves
read_committed (last stable offset, aborted transactions), fences a zombie producer by its
``transactional.id``, and aborts a transaction left open by a killed worker — at its
transaction timeout, or when the worker's replacement starts — so that it is never read."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.client import AIOKafkaClient
from aiokafka.errors import KafkaError
from aiokafka.protocol.fetch import FetchRequest
from kafka_broker import KafkaBroker, TansuBroker
from kafka_txn import transaction_cases

from framework.errors import UnsupportedOperation
from framework.systems.base import OffsetRange
from framework.systems.kafka.fencing import fence_producer
from framework.systems.kafka.system import KafkaSystem
from framework.systems.reading import final_offsets, read_columns_range, read_range
from groupers import SystemStreamPartition

READ_UNCOMMITTED, READ_COMMITTED = 0, 1


async def _read(system: KafkaSystem, topic: str) -> list[tuple[int, bytes | None]]:
    end = (await system.offsets(topic))[0].end
    ssp = SystemStreamPartition(system.name, topic, 0)
    records = [(r.offset, r.value) async for batch in read_range(system, ssp, 0, end)
               for r in batch]
    columns = [pair async for offsets, _, values in read_columns_range(system, ssp, 0, end)
               for pair in zip(offsets, values, strict=True)]
    assert columns == records  # a restore's column reads see what record reads see
    return records


async def _broker_fetch(bootstrap: str, topic: str, isolation: int
                        ) -> tuple[int, int, list[tuple[int, int]]]:
    """The broker's own answer to a Fetch of partition 0 from offset 0: high watermark,
    last stable offset and aborted transactions (producer id, first offset)."""
    client = AIOKafkaClient(bootstrap_servers=bootstrap)
    await client.bootstrap()
    try:
        tp = TopicPartition(topic, 0)
        await client._wait_on_metadata(topic)
        leader = client.cluster.leader_for_partition(tp)
        request = FetchRequest(100, 1, 1 << 20, isolation, [(topic, [(0, 0, 1 << 20)])])
        response = await client.send(leader, request)
        [(_, partitions)] = response.topics
        [(_, error, high, *data)] = partitions
        assert error == 0
        aborted = data[2] if response.API_VERSION >= 11 else data[-2]
        return high, data[0], sorted((int(p), int(o)) for p, o in (aborted or ()))
    finally:
        await client.close()


async def test_the_broker_serves_read_committed(kafka_broker: KafkaBroker) -> None:
    """Offsets: 0 committed, 1 COMMIT, 2 aborted, 3 ABORT, 4 plain, 5 open (then 6 COMMIT).
    The broker's Fetch stops read_committed readers at the open transaction (last stable
    offset 5) and lists the aborted one; sampan's readers see committed records only, and
    `offsets()` ends at the last stable offset."""
    system = KafkaSystem("kafka", kafka_broker.bootstrap)
    try:
        async with transaction_cases(kafka_broker.bootstrap, "rc") as (topic, commit):
            high, stable, aborted = await _broker_fetch(kafka_broker.bootstrap, topic,
                                                        READ_COMMITTED)
            assert (high, stable) == (6, 5)
            assert [first for _, first in aborted] == [2]
            assert await _read(system, topic) == [(0, b"committed"), (4, b"plain")]
            assert (await system.offsets(topic))[0].end == 5
            await commit()
            assert (await _broker_fetch(kafka_broker.bootstrap, topic,
                                        READ_COMMITTED))[:2] == (7, 7)
            assert await _read(system, topic) == [(0, b"committed"), (4, b"plain"),
                                                  (5, b"open")]
            assert (await system.offsets(topic))[0].end == 6  # the COMMIT marker is not in
    finally:
        await system.close()


async def test_settled_offsets_wait_for_a_commit_to_become_visible(
        kafka_broker: KafkaBroker) -> None:
    """A commit returns before the broker writes its markers (seen in a full run: outputs
    of a worker's last transaction missing from a check made right after it stopped), so
    a check of finished work reads its ends with `final_offsets`: they wait, within the
    system's timeout, until no transaction is open or being completed — a transaction
    committed during the wait is read in full; one that stays open stays outside."""
    system = KafkaSystem("kafka", kafka_broker.bootstrap, {"timeout_s": 3})
    try:
        async with transaction_cases(kafka_broker.bootstrap, "settle") as (topic, commit):
            settling = asyncio.ensure_future(final_offsets(system, topic))
            await asyncio.sleep(0.5)
            assert not settling.done()  # the open transaction is waited for
            assert (await system.offsets(topic))[0].end == 5  # the plain read does not wait
            await commit()
            assert (await settling)[0] == OffsetRange(0, 6)  # with the record committed
        async with transaction_cases(kafka_broker.bootstrap, "open") as (topic, _):
            started = time.monotonic()
            assert (await final_offsets(system, topic))[0] == OffsetRange(0, 5)
            assert time.monotonic() - started >= 3  # waited the timeout, then left it out
    finally:
        await system.close()


async def test_other_read_committed_consumers_of_the_process_see_only_records(
        kafka_broker: KafkaBroker) -> None:
    """sampan's consumers keep control batches; an application's own read_committed
    aiokafka consumer in the same process (the peers bench's output reader got a COMMIT
    marker as a record with no value) still gets aiokafka's records only."""
    system = KafkaSystem("kafka", kafka_broker.bootstrap)
    other = AIOKafkaConsumer(bootstrap_servers=kafka_broker.bootstrap,
                             isolation_level="read_committed", enable_auto_commit=False)
    try:
        async with transaction_cases(kafka_broker.bootstrap, "others") as (topic, commit):
            await commit()
            assert await _read(system, topic) == [(0, b"committed"), (4, b"plain"),
                                                  (5, b"open")]  # sampan's reader first
            await other.start()
            tp = TopicPartition(topic, 0)
            other.assign([tp])
            await other.seek_to_beginning(tp)
            seen: list[tuple[int, bytes | None]] = []
            while await other.position(tp) < 7:
                batches = await other.getmany(tp, timeout_ms=500)
                seen += [(m.offset, m.value) for m in batches.get(tp, [])]
            assert seen == [(0, b"committed"), (4, b"plain"), (5, b"open")]
    finally:
        await other.stop()
        await system.close()


async def test_the_broker_fences_a_zombie_by_its_transactional_id(
        kafka_broker: KafkaBroker) -> None:
    """A second producer initialising the same ``transactional.id`` (a worker's
    replacement) fences the first, with no help from sampan: the first's open transaction
    is aborted and its commit refused."""
    system = KafkaSystem("kafka", kafka_broker.bootstrap)
    topic = f"zombie-{uuid.uuid4().hex[:8]}"
    txn_id = f"{topic}-txn"
    zombie = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap, transactional_id=txn_id)
    replacement = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap,
                                   transactional_id=txn_id)
    await system.create_stream(topic, 1)
    await zombie.start()
    try:
        await zombie.begin_transaction()
        await zombie.send_and_wait(topic, b"zombie", partition=0)
        await replacement.start()
        async with replacement.transaction():
            await replacement.send_and_wait(topic, b"replacement", partition=0)
        with pytest.raises(KafkaError):
            await zombie.commit_transaction()
        assert [value for _, value in await _read(system, topic)] == [b"replacement"]
    finally:
        await replacement.stop()
        await zombie.stop()
        await system.close()


async def test_an_epoch_bump_fences_the_producer_and_aborts_its_transaction(
        kafka_broker: KafkaBroker) -> None:
    """What a newer job model does to the workers of the older one (`KafkaSystem.fence`):
    bump each recorded producer's epoch (KIP-360); the broker aborts what it left open.
    Bumping again from the same identity answers the current one, without a new bump."""
    topic = f"fence-{uuid.uuid4().hex[:8]}"
    txn_id = f"{topic}-txn"
    zombie = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap, transactional_id=txn_id)
    system = KafkaSystem("kafka", kafka_broker.bootstrap)
    await system.create_stream(topic, 1)
    await zombie.start()
    try:
        await zombie.begin_transaction()
        await zombie.send_and_wait(topic, b"never", partition=0)
        manager = zombie._txn_manager
        identity = (manager.producer_id, manager.producer_epoch)
        producer = await system.start_producer()
        bumped = await fence_producer(producer.client, txn_id, identity)
        assert bumped == (identity[0], identity[1] + 1)
        assert await fence_producer(producer.client, txn_id, identity) == bumped
        with pytest.raises(KafkaError):
            await zombie.commit_transaction()
        assert await _read(system, topic) == []
    finally:
        await system.close()
        await zombie.stop()


_OPEN_AND_WAIT = textwrap.dedent("""
    import asyncio, sys
    from framework.systems.base import ProducerRecord
    from framework.systems.kafka.system import KafkaSystem

    async def main(bootstrap, job, topic):
        system = KafkaSystem("kafka", bootstrap, {"transaction_timeout_s": 5})
        transactions = await system.start_transactions(job, 0)
        producer = transactions._producer
        await producer.begin_transaction()
        await system.send_records(producer, [ProducerRecord(topic, b"k", b"open", 0)])
        print("open", flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main(*sys.argv[1:]))
""")


@pytest.mark.parametrize("ended_by", ["transaction timeout", "replacement's init"])
async def test_a_transaction_left_open_by_a_killed_worker_is_aborted_and_never_read(
        kafka_broker: KafkaBroker, ended_by: str) -> None:
    """A process holding worker 0's transactional producer (transaction timeout 5 s)
    writes a record in a transaction and is SIGKILLed. Readers are held at it until the
    broker aborts it: on its own after the timeout, or when worker 0's replacement starts
    its producer. Then the record after it is read; the open one never is, and the broker
    lists its transaction as aborted."""
    job, topic = f"open-{uuid.uuid4().hex[:8]}", f"open-{uuid.uuid4().hex[:8]}"
    system = KafkaSystem("kafka", kafka_broker.bootstrap)
    await system.create_stream(topic, 1)
    process = subprocess.Popen(
        [sys.executable, "-c", _OPEN_AND_WAIT, kafka_broker.bootstrap, job, topic],
        stdout=subprocess.PIPE, start_new_session=True, env={**os.environ})
    replacement: KafkaSystem | None = None
    try:
        assert process.stdout is not None
        line = await asyncio.to_thread(process.stdout.readline)
        assert line == b"open\n", line
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)
        await system.produce_rows([(topic, b"k", b"after", 0, None, ())])
        if ended_by == "replacement's init":
            replacement = KafkaSystem("kafka", kafka_broker.bootstrap)
            await replacement.start_transactions(job, 0)
        deadline = time.monotonic() + 120
        while not (values := [value for _, value in await _read(system, topic)]):
            assert time.monotonic() < deadline, "the open transaction was never aborted"
            await asyncio.sleep(0.5)  # readers are held behind the open transaction
        assert values == [b"after"]
        high, stable, aborted = await _broker_fetch(kafka_broker.bootstrap, topic,
                                                    READ_COMMITTED)
        assert stable == high and [first for _, first in aborted] == [0]
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)
        if replacement is not None:
            await replacement.close()
        await system.close()


async def test_probe_refuses_a_broker_without_transactions(tansu_broker: TansuBroker) -> None:
    system = KafkaSystem("kafka", tansu_broker.bootstrap)
    try:
        with pytest.raises(UnsupportedOperation, match='guarantee = "at-least-once"'):
            await system.probe_transactions("probe-job")
    finally:
        await system.close()


def test_transaction_timeout_is_validated() -> None:
    from framework.errors import ConfigError
    from framework.systems.kafka.options import KafkaOptions

    assert KafkaOptions.from_mapping("kafka", {}).transaction_timeout_s == 60
    for wrong in (0, 901, "60", True):
        with pytest.raises(ConfigError, match="transaction_timeout_s must be a number"):
            KafkaOptions.from_mapping("kafka", {"transaction_timeout_s": wrong})

