"""`client_options.namespace` on real Apache Kafka: two systems with the same stream and job
names share one broker without seeing each other's topics, checkpoints, fences or
transactional producers."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

from framework.drill.verify import read_stream
from framework.errors import ConfigError
from framework.systems.base import Checkpoint, CommitRequest, ProducerRecord, producer_row
from framework.systems.kafka.options import KafkaOptions
from framework.systems.kafka.system import KafkaSystem
from groupers import SystemStreamPartition as SSP


@pytest.fixture
async def spaces(kafka_broker: Any) -> AsyncIterator[tuple[KafkaSystem, KafkaSystem,
                                                           KafkaSystem, str]]:
    """Systems in namespaces ``a`` and ``b`` of this test, and one without a namespace."""
    tag = f"ns{os.getpid()}-{os.urandom(3).hex()}"
    made = [KafkaSystem("kafka", kafka_broker.bootstrap, {"namespace": f"{tag}-{space}."})
            for space in ("a", "b")]
    made.append(KafkaSystem("kafka", kafka_broker.bootstrap))
    for system in made:
        await system.start()
    yield made[0], made[1], made[2], tag
    for system in made:
        await system.close()


async def test_same_stream_names_in_two_namespaces_stay_apart(spaces: Any) -> None:
    a, b, plain, tag = spaces
    await a.create_stream("words", 2)
    await b.create_stream("words", 3)
    await a.produce([ProducerRecord("words", b"k", b"from a")])
    await b.produce([ProducerRecord("words", b"k", b"from b"),
                     ProducerRecord("words", b"j", b"from b")])
    await a.expand_stream("words", 4)
    assert (await a.list_streams())["words"] == 4
    assert (await b.list_streams())["words"] == 3
    assert {s: n for s, n in (await plain.list_streams()).items() if s.startswith(tag)} == {
        f"{tag}-a.words": 4, f"{tag}-b.words": 3}
    assert sorted(v for rows in (await read_stream(a, "words")).values() for _, v in rows
                  ) == [b"from a"]
    assert sorted(v for rows in (await read_stream(b, "words")).values() for _, v in rows
                  ) == [b"from b", b"from b"]
    assert sum(r.end for r in (await a.offsets("words")).values()) == 1


async def test_checkpoints_and_fences_of_one_job_name_stay_apart(spaces: Any) -> None:
    a, b, _, _ = spaces
    ssp = SSP("kafka", "in", 0)
    await a.fence("job", 3)
    await b.fence("job", 7)
    await a.commit(CommitRequest(job="job", epoch=3, records=[],
                                 checkpoints=[Checkpoint("Partition 0", 3, {ssp: 10})]))
    await b.commit(CommitRequest(job="job", epoch=7, records=[],
                                 checkpoints=[Checkpoint("Partition 0", 7, {ssp: 20})]))
    assert (await a.fenced_epoch("job"), await b.fenced_epoch("job")) == (3, 7)
    assert dict((await a.read_checkpoints("job"))["Partition 0"].inputs) == {ssp: 10}
    assert dict((await b.read_checkpoints("job"))["Partition 0"].inputs) == {ssp: 20}


async def test_transactional_producers_of_one_worker_name_do_not_fence_each_other(
        spaces: Any) -> None:
    """Worker 0 of job ``job`` in both namespaces: each commits its own transactions."""
    a, b, _, _ = spaces
    for system in (a, b):
        await system.create_stream("out", 1)
        await system.start_transactions("job", 0)
    for round_ in range(2):
        for system in (a, b):
            row = producer_row(ProducerRecord("out", b"k", f"{round_}".encode()))
            await system.commit_transaction("job", 0, [row], lambda positions: [])
    for system in (a, b):
        assert [v for rows in (await read_stream(system, "out")).values() for _, v in rows
                ] == [b"0", b"1"]


def test_a_namespace_must_be_a_topic_name_prefix() -> None:
    with pytest.raises(ConfigError, match="namespace must be a string of letters"):
        KafkaOptions.from_mapping("kafka", {"namespace": "bad/name"})
    assert KafkaOptions.from_mapping("kafka", {"namespace": "team-a."}).named("x") == "team-a.x"
