"""The suite's 3-node Apache Kafka cluster (replication factor 3, min.insync.replicas 2):
a replicated stream keeps every record when its leader is killed and the node rejoins on
its own folders; a job rides through the SIGKILL of the node leading one of its input
partitions and one of its changelog partitions: no worker crashes, every output is there
exactly once. The module's tests share one cluster (`kafka_cluster`)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from jobs import harness as h
from jobs import jobfiles as jf
from jobs import outputs as out
from jobs.outputs import checkpointed, exact_outputs
from jobs.runs import SumRun
from kafka_broker import KafkaCluster

from framework.systems.base import OffsetRange, ProducerRecord
from framework.systems.kafka.system import KafkaSystem
from groupers import SystemStreamPartition as SSP

RECORDS = 20_000
KEYS = 500


async def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """Partition → node id of its leader."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        [described] = await admin.describe_topics([topic])
        return {p["partition"]: p["leader"] for p in described["partitions"]}
    finally:
        await admin.close()


def _victim(inputs: dict[int, int], changelogs: dict[int, int]) -> int:
    """The node leading most input and changelog partitions, at least one of each when
    one node does."""
    def rank(node: int) -> tuple[bool, int]:
        both = node in inputs.values() and node in changelogs.values()
        return both, [*inputs.values(), *changelogs.values()].count(node)
    return max(sorted({*inputs.values(), *changelogs.values()}), key=rank)


async def _read(system: KafkaSystem, topic: str, expected: int) -> list[bytes | None]:
    consumer = system.consumer()
    consumer.assign({SSP("kafka", topic, 0): 0})
    values: list[bytes | None] = []
    try:
        for _ in range(200):  # bounded: a lost record fails the caller's assertion
            if len(values) >= expected:
                break
            for records in (await consumer.fetch(max_records=500, timeout_ms=500)).values():
                values.extend(r.value for r in records)
    finally:
        await consumer.close()
    return values


def test_a_replicated_stream_keeps_every_record_when_its_leader_is_killed(
        kafka_cluster: KafkaCluster) -> None:
    topic = f"rf3-{uuid.uuid4().hex[:8]}"

    async def run() -> tuple[int, int, OffsetRange, list[bytes | None]]:
        # A 60 s client timeout: the write right after the kill waits out the leader's
        # move (the broker session timeout, 6 s, an election, a metadata refresh), which
        # took over the default 10 s on a loaded machine (a fresh-clone run, 2026-11-30).
        system = KafkaSystem("kafka", kafka_cluster.bootstrap,
                             {"replication_factor": 3, "timeout_s": 60})
        try:
            await system.create_stream(topic, 1)
            await system.produce([ProducerRecord(topic, b"k", b"%d" % i, partition=0)
                                  for i in range(500)])
            leader = (await _leaders(kafka_cluster.bootstrap, topic))[0]
            kafka_cluster.node(leader).kill()
            await system.produce([ProducerRecord(topic, b"k", b"%d" % i, partition=0)
                                  for i in range(500, 1000)])
            offsets = (await system.offsets(topic))[0]
            values = await _read(system, topic, 1000)
            new_leader = (await _leaders(kafka_cluster.bootstrap, topic))[0]
            return leader, new_leader, offsets, values
        finally:
            await system.close()

    starts = {node.node_id: node.starts for node in kafka_cluster.nodes}
    leader, new_leader, offsets, values = asyncio.run(run())

    assert new_leader != leader
    assert offsets == OffsetRange(0, 1000)
    assert values == [b"%d" % i for i in range(1000)]
    kafka_cluster.start(kafka_cluster.node(leader))  # rejoins on its own folders
    assert kafka_cluster.node(leader).alive
    assert kafka_cluster.node(leader).starts == starts[leader] + 1


@pytest.mark.timeout(900)
async def test_killing_the_leader_of_an_input_and_a_changelog_partition_keeps_every_output(
        kafka_cluster: KafkaCluster, tmp_path: Path) -> None:
    run = SumRun(tmp_path / "job", kafka_cluster.bootstrap,
                 client_options="replication_factor = 3")
    config = run.config
    events = jf.streams(config)[0]
    changelog = config.changelog_stream("totals").partition(".")[2]
    work = out.Workload(KEYS, stream=events)
    # The test's own input writes get a 60 s client timeout: one right after a node is
    # killed waits out the leader's move (the cluster's broker session timeout, 6 s, then
    # an election and a metadata refresh), which took over the default 10 s on a loaded
    # machine. The job keeps the default.
    meta = await h.open_meta(config, timeout_s=60)
    run.start()
    try:
        async def healthy() -> bool:
            return run.status()[0] == 0
        await run.wait(healthy, "a healthy job", 240)
        await h.produce(meta, work.records(RECORDS // 2))

        async def some_committed() -> bool:
            return await checkpointed(meta, config) >= RECORDS // 8
        await run.wait(some_committed, "the first commits", 240)
        pids = run.worker_pids()
        killed: list[int] = []
        covered: set[str] = set()  # input, changelog: kinds of partition a killed node led
        while covered != {"input", "changelog"}:
            if killed:  # the last node led one kind only: back it comes, then the next
                await asyncio.to_thread(kafka_cluster.start, kafka_cluster.node(killed[-1]))
            inputs = {} if "input" in covered else await _leaders(kafka_cluster.bootstrap,
                                                                  events)
            changelogs = {} if "changelog" in covered else await _leaders(
                kafka_cluster.bootstrap, changelog)
            victim = _victim(inputs, changelogs)
            kafka_cluster.node(victim).kill()
            killed.append(victim)
            covered |= {kind for kind, leaders in (("input", inputs), ("changelog", changelogs))
                        if victim in leaders.values()}
            await h.produce(meta, work.records(RECORDS // 4 // len(killed)))

            async def progressed(target: int = work.count) -> bool:
                return await checkpointed(meta, config) >= target
            await run.wait(progressed, f"every input so far committed after node "
                                            f"{victim} was killed", 300)
        await h.produce(meta, work.records(RECORDS - work.count))

        async def everything_committed() -> bool:
            return await checkpointed(meta, config) >= RECORDS
        await run.wait(everything_committed, "every input committed", 300)
        assert run.status()[1]["restarts"] == 0, run.logs_text()
        assert run.worker_pids() == pids
        assert await run.stop() == 0
        assert await exact_outputs(meta, config, work) == []
    finally:
        run.kill()
        await meta.close()
    assert killed
    assert "Traceback" not in run.logs_text(tail=10**7)
