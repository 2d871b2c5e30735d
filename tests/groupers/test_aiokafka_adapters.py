"""The aiokafka strategies of `groupers.aiokafka`: user_data encoding, translation between
the consumer protocol and the pure assignors, per-consumer state, and real groups of
`AIOKafkaConsumer`s on the session's tansu broker."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

import groupers as G
from groupers import aiokafka_userdata as ud
from groupers.aiokafka import (
    LagAwarePartitionAssignor,
    StickyPartitionAssignor,
    StreamJoinStickyPartitionAssignor,
    make_lag_aware_assignor,
    make_sticky_assignor,
    make_stream_join_assignor,
    partition_counts,
)
from groupers.model import TopicPartition as TP

SETTLE_BOUND_S = 60  # upper bound for a group to settle; a bound, never a timing assertion


def tps(spec: str) -> list[TP]:
    """``"t-0 t-2"`` → [TP("t", 0), TP("t", 2)]."""
    return [TP(name.rsplit("-", 1)[0], int(name.rsplit("-", 1)[1])) for name in spec.split()]


# --- user_data encoding --------------------------------------------------------------


def test_sticky_metadata_round_trips_owned_partitions_and_generation() -> None:
    data = ud.encode_sticky_metadata(tps("b-1 a-3 a-0"), 7)

    assert data == b'{"v":1,"generation":7,"owned":{"a":[0,3],"b":[1]}}'
    assert ud.decode_sticky_metadata(data) == ud.OwnedPartitions(frozenset(tps("a-0 a-3 b-1")), 7)


def test_sticky_assignment_round_trips_the_generation() -> None:
    assert ud.decode_sticky_assignment(ud.encode_sticky_assignment(4)) == 4


def test_join_metadata_round_trips_partition_numbers_and_epoch() -> None:
    data = ud.encode_join_metadata([3, 0, 3], 2)

    assert data == b'{"v":1,"epoch":2,"owned":[0,3]}'
    assert ud.decode_join_metadata(data) == ud.OwnedNumbers(frozenset({0, 3}), 2)


def test_join_assignment_round_trips_partition_numbers_and_epoch() -> None:
    data = ud.encode_join_assignment([1, 2], 5)

    assert ud.decode_join_assignment(data) == ud.OwnedNumbers(frozenset({1, 2}), 5)


def test_a_later_version_with_extra_fields_is_read_by_its_version_1_fields() -> None:
    data = b'{"v":2,"generation":3,"owned":{"t":[1]},"rack":"r1"}'

    assert ud.decode_sticky_metadata(data) == ud.OwnedPartitions(frozenset(tps("t-1")), 3)


GARBAGE_STICKY = {
    "empty": b"",
    "not utf-8": b"\xff\xfe",
    "not json": b"garbage",
    "json list": b"[1, 2]",
    "no version": b'{"generation":1,"owned":{"t":[0]}}',
    "version 0": b'{"v":0,"generation":1,"owned":{"t":[0]}}',
    "version as string": b'{"v":"1","generation":1,"owned":{"t":[0]}}',
    "negative partition": b'{"v":1,"generation":1,"owned":{"t":[-1]}}',
    "bool partition": b'{"v":1,"generation":1,"owned":{"t":[true]}}',
    "string partition": b'{"v":1,"generation":1,"owned":{"t":["0"]}}',
    "float generation": b'{"v":1,"generation":1.5,"owned":{"t":[0]}}',
    "generation below -1": b'{"v":1,"generation":-2,"owned":{"t":[0]}}',
    "owned as list": b'{"v":1,"generation":1,"owned":[0]}',
    "missing owned": b'{"v":1,"generation":1}',
    "deep nesting": b"[" * 100_000,
}


@pytest.mark.parametrize("data", GARBAGE_STICKY.values(), ids=GARBAGE_STICKY.keys())
def test_invalid_sticky_metadata_decodes_as_no_previous_ownership(data: bytes) -> None:
    assert ud.decode_sticky_metadata(data) == ud.OwnedPartitions(frozenset(), -1)


GARBAGE_JOIN = {
    "empty": b"",
    "not json": b"\x00\x01",
    "negative number": b'{"v":1,"epoch":1,"owned":[-3]}',
    "epoch as string": b'{"v":1,"epoch":"1","owned":[0]}',
    "owned as object": b'{"v":1,"epoch":1,"owned":{"t":[0]}}',
}


@pytest.mark.parametrize("data", GARBAGE_JOIN.values(), ids=GARBAGE_JOIN.keys())
def test_invalid_join_metadata_decodes_as_no_previous_ownership(data: bytes) -> None:
    assert ud.decode_join_metadata(data) == ud.OwnedNumbers(frozenset(), -1)


def test_an_unreadable_sticky_assignment_has_generation_minus_1() -> None:
    assert ud.decode_sticky_assignment(b"\x00garbage") == -1


# --- translation between the consumer protocol and the assignors ----------------------


class FakeCluster:
    """The one ``ClusterMetadata`` method the strategies use."""

    def __init__(self, counts: Mapping[str, int]) -> None:
        self.counts = dict(counts)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return set(range(self.counts[topic])) if topic in self.counts else None


def on_the_wire(metadata: Any) -> Any:
    """Member metadata as the leader sees it: encoded by a member, decoded by aiokafka."""
    return ConsumerProtocolMemberMetadata.decode(metadata.encode())


def delivered(assignment: Any) -> Any:
    """An assignment as a member receives it from SyncGroup."""
    return ConsumerProtocolMemberAssignment.decode(assignment.encode())


def partitions_of(assignment: Any) -> list[TP]:
    return sorted(TP(*tp) for tp in assignment.partitions())


def test_partition_counts_come_from_cluster_metadata_and_unknown_topics_have_0() -> None:
    assert partition_counts(FakeCluster({"a": 3}), ["a", "gone"]) == {"a": 3, "gone": 0}


def test_a_new_sticky_consumer_reports_nothing_owned_at_generation_minus_1() -> None:
    metadata = make_sticky_assignor().metadata({"t"})

    assert metadata.subscription == ["t"]
    assert ud.decode_sticky_metadata(metadata.user_data) == ud.OwnedPartitions(frozenset(), -1)


def test_sticky_assign_returns_the_sticky_assignors_partitions_per_member() -> None:
    strategy = make_sticky_assignor()
    members = {m: on_the_wire(make_sticky_assignor().metadata(["t"])) for m in ("m1", "m2")}

    result = strategy.assign(FakeCluster({"t": 4}), members)

    expected = G.StickyAssignor().assign({"t": 4}, {m: G.Subscription(["t"]) for m in members})
    assert {m: partitions_of(delivered(a)) for m, a in result.items()} == expected


def test_sticky_leader_stamps_the_highest_reported_generation_plus_1() -> None:
    members = {
        "m1": ConsumerProtocolMemberMetadata(0, ["t"], ud.encode_sticky_metadata(tps("t-0"), 4)),
        "m2": ConsumerProtocolMemberMetadata(0, ["t"], ud.encode_sticky_metadata(tps("t-1"), 6)),
    }

    result = StickyPartitionAssignor.assign(FakeCluster({"t": 2}), members)

    assert {m: ud.decode_sticky_assignment(a.user_data) for m, a in result.items()} == {
        "m1": 7, "m2": 7}


def test_sticky_assign_keeps_what_members_report_owning() -> None:
    members = {
        "m1": ConsumerProtocolMemberMetadata(0, ["t"], ud.encode_sticky_metadata(tps("t-2"), 1)),
        "m2": ConsumerProtocolMemberMetadata(0, ["t"], ud.encode_sticky_metadata(tps("t-0"), 1)),
    }

    result = StickyPartitionAssignor.assign(FakeCluster({"t": 3}), members)

    assert TP("t", 2) in partitions_of(result["m1"])
    assert TP("t", 0) in partitions_of(result["m2"])


def test_a_member_with_garbage_user_data_is_assigned_as_owning_nothing() -> None:
    members = {
        "m1": ConsumerProtocolMemberMetadata(0, ["t"], b"\xde\xad"),
        "m2": ConsumerProtocolMemberMetadata(0, ["t"], ud.encode_sticky_metadata(tps("t-0"), 0)),
    }

    result = StickyPartitionAssignor.assign(FakeCluster({"t": 2}), members)

    assert {m: partitions_of(a) for m, a in result.items()} == {
        "m1": tps("t-1"), "m2": tps("t-0")}


def test_a_topic_missing_from_cluster_metadata_is_assigned_to_nobody() -> None:
    members = {"m1": on_the_wire(make_sticky_assignor().metadata(["t", "gone"]))}

    result = StickyPartitionAssignor.assign(FakeCluster({"t": 1}), members)

    assert partitions_of(result["m1"]) == tps("t-0")


def test_sticky_on_assignment_makes_the_next_metadata_report_the_assignment() -> None:
    strategy = make_sticky_assignor()
    strategy.on_assignment(delivered(ConsumerProtocolMemberAssignment(
        0, [("t", [0, 2])], ud.encode_sticky_assignment(3))))

    reported = ud.decode_sticky_metadata(strategy.metadata(["t"]).user_data)

    assert reported == ud.OwnedPartitions(frozenset(tps("t-0 t-2")), 3)


def test_two_made_sticky_classes_do_not_share_ownership() -> None:
    first, second = make_sticky_assignor(), make_sticky_assignor()
    first.on_assignment(ConsumerProtocolMemberAssignment(
        0, [("t", [1])], ud.encode_sticky_assignment(2)))

    assert second.owned() == ud.OwnedPartitions(frozenset(), -1)
    assert first.owned() == ud.OwnedPartitions(frozenset(tps("t-1")), 2)


def test_a_made_class_does_not_inherit_the_exported_class_ownership() -> None:
    class Exported(StickyPartitionAssignor):
        """Stands in for the exported class used directly by some consumer."""

    Exported.on_assignment(ConsumerProtocolMemberAssignment(
        0, [("t", [0])], ud.encode_sticky_assignment(1)))

    class MadeFromUsed(Exported):
        """A class made after its base already holds state."""

    assert MadeFromUsed.owned() == ud.OwnedPartitions(frozenset(), -1)


def test_stream_join_gives_each_member_the_same_numbers_of_every_topic() -> None:
    members = {m: on_the_wire(make_stream_join_assignor().metadata(["a", "b"]))
               for m in ("m1", "m2")}

    result = StreamJoinStickyPartitionAssignor.assign(FakeCluster({"a": 4, "b": 4}), members)

    assert {m: partitions_of(a) for m, a in result.items()} == {
        "m1": tps("a-0 a-2 b-0 b-2"), "m2": tps("a-1 a-3 b-1 b-3")}
    assert {m: ud.decode_join_assignment(a.user_data) for m, a in result.items()} == {
        "m1": ud.OwnedNumbers(frozenset({0, 2}), 0), "m2": ud.OwnedNumbers(frozenset({1, 3}), 0)}


def test_stream_join_assign_keeps_reported_numbers() -> None:
    members = {
        "m1": ConsumerProtocolMemberMetadata(0, ["a", "b"], ud.encode_join_metadata([3], 2)),
        "m2": ConsumerProtocolMemberMetadata(0, ["a", "b"], ud.encode_join_metadata([0], 2)),
    }

    result = StreamJoinStickyPartitionAssignor.assign(FakeCluster({"a": 4, "b": 4}), members)

    numbers = {m: ud.decode_join_assignment(a.user_data) for m, a in result.items()}
    assert 3 in numbers["m1"].numbers and 0 in numbers["m2"].numbers
    assert numbers["m1"].epoch == numbers["m2"].epoch == 3


def test_stream_join_on_assignment_makes_the_next_metadata_report_numbers_and_epoch() -> None:
    strategy = make_stream_join_assignor()
    strategy.on_assignment(delivered(ConsumerProtocolMemberAssignment(
        0, [("a", [1]), ("b", [1])], ud.encode_join_assignment([1], 4))))

    reported = ud.decode_join_metadata(strategy.metadata(["a", "b"]).user_data)

    assert reported == ud.OwnedNumbers(frozenset({1}), 4)


def test_stream_join_on_an_unreadable_assignment_records_numbers_at_epoch_minus_1() -> None:
    strategy = make_stream_join_assignor()
    strategy.on_assignment(ConsumerProtocolMemberAssignment(0, [("a", [2]), ("b", [2])], b"?"))

    assert strategy.owned() == ud.OwnedNumbers(frozenset({2}), -1)


def lag_members(count: int) -> dict[str, Any]:
    return {f"m{i}": on_the_wire(LagAwarePartitionAssignor.metadata(["t"])) for i in range(count)}


def test_lag_aware_asks_the_lag_source_for_every_subscribed_partition() -> None:
    asked: list[list[TP]] = []

    def source(partitions: Sequence[TP]) -> Mapping[TP, int]:
        asked.append(list(partitions))
        return {}

    make_lag_aware_assignor(source).assign(FakeCluster({"t": 3}), lag_members(2))

    assert asked == [tps("t-0 t-1 t-2")]


def test_lag_aware_assigns_by_the_sources_lags() -> None:
    lags = {TP("t", 0): 100_000, TP("t", 1): 60_000, TP("t", 2): 50_000}

    result = make_lag_aware_assignor(lambda _: lags).assign(FakeCluster({"t": 3}), lag_members(2))

    assert {m: partitions_of(a) for m, a in result.items()} == {
        "m0": tps("t-0"), "m1": tps("t-1 t-2")}


def test_lag_aware_without_a_source_balances_counts_as_if_every_lag_were_0() -> None:
    result = LagAwarePartitionAssignor.assign(FakeCluster({"t": 3}), lag_members(2))

    assert {m: partitions_of(a) for m, a in result.items()} == {
        "m0": tps("t-0 t-2"), "m1": tps("t-1")}


def test_a_failing_lag_source_counts_every_lag_as_0() -> None:
    def broken(partitions: Sequence[TP]) -> Mapping[TP, int]:
        raise RuntimeError("offsets unavailable")

    result = make_lag_aware_assignor(broken).assign(FakeCluster({"t": 3}), lag_members(2))

    assert {m: partitions_of(a) for m, a in result.items()} == {
        "m0": tps("t-0 t-2"), "m1": tps("t-1")}


def test_invalid_lags_from_the_source_count_as_0() -> None:
    lags: dict[TP, Any] = {TP("t", 0): -5, TP("t", 1): "many", TP("t", 2): 10}

    result = make_lag_aware_assignor(lambda _: lags).assign(FakeCluster({"t": 3}), lag_members(2))

    assert {m: partitions_of(a) for m, a in result.items()} == {
        "m0": tps("t-2"), "m1": tps("t-0 t-1")}


# --- real groups on the tansu broker --------------------------------------------------


class LeaderRecord:
    """What the group's leader last assigned, so a test knows when the group settled."""

    def __init__(self) -> None:
        self.result: dict[str, list[TP]] = {}


def recorded(strategy: type[Any], record: LeaderRecord) -> type[Any]:
    """``strategy`` that also writes each result it computes as leader into ``record``."""

    class Recorded(strategy):  # type: ignore[misc,valid-type]
        @classmethod
        def assign(cls, cluster: Any, members: Mapping[str, Any]) -> dict[str, Any]:
            result: dict[str, Any] = super().assign(cluster, members)
            record.result = {m: partitions_of(a) for m, a in result.items()}
            return result

    return Recorded


@pytest.fixture
async def admin(kafka_broker: Any) -> AsyncIterator[AIOKafkaAdminClient]:
    client = AIOKafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    await client.start()
    yield client
    await client.close()


class Group:
    """Consumers of one group id, each with its own strategy class; stops them all."""

    def __init__(self, bootstrap: str, topics: Sequence[str]) -> None:
        self.bootstrap, self.topics = bootstrap, list(topics)
        self.group_id = f"g-{uuid.uuid4().hex[:12]}"
        self.record = LeaderRecord()
        self.consumers: list[AIOKafkaConsumer] = []

    async def join(self, make_strategy: Callable[[], type[Any]], count: int) -> None:
        """Start ``count`` consumers at once, so they join in one rebalance round.

        tansu holds each join round open for part of the session timeout; one round
        keeps the test short.
        """
        joining = [
            AIOKafkaConsumer(
                *self.topics, bootstrap_servers=self.bootstrap, group_id=self.group_id,
                partition_assignment_strategy=[recorded(make_strategy(), self.record)],
                enable_auto_commit=False, heartbeat_interval_ms=300, session_timeout_ms=6000,
            )
            for _ in range(count)
        ]
        self.consumers.extend(joining)
        await asyncio.gather(*(consumer.start() for consumer in joining))

    async def leave(self, index: int) -> None:
        await self.consumers.pop(index).stop()

    def assignments(self) -> list[list[TP]]:
        return [sorted(TP(*tp) for tp in c.assignment()) for c in self.consumers]

    async def settled(self) -> list[list[TP]]:
        """Each consumer's partitions once every member holds the leader's latest result."""

        def done() -> bool:
            leader = sorted(self.record.result.values())
            return len(leader) == len(self.consumers) and leader == sorted(self.assignments())

        async def wait() -> None:
            while not done():
                await asyncio.sleep(0.1)

        try:
            await asyncio.wait_for(wait(), SETTLE_BOUND_S)
        except TimeoutError:
            pytest.fail(f"group did not settle within {SETTLE_BOUND_S}s: leader's last result "
                        f"{self.record.result}, consumers hold {self.assignments()}")
        return self.assignments()

    async def close(self) -> None:
        while self.consumers:
            await self.leave(-1)


@pytest.fixture
async def group_factory(kafka_broker: Any) -> AsyncIterator[Callable[[Sequence[str]], Group]]:
    groups: list[Group] = []

    def new_group(topics: Sequence[str]) -> Group:
        groups.append(Group(kafka_broker.bootstrap, topics))
        return groups[-1]

    yield new_group
    for group in groups:
        await group.close()


async def create_topics(admin: AIOKafkaAdminClient, partitions: int, count: int) -> list[str]:
    names = [f"t-{uuid.uuid4().hex[:12]}" for _ in range(count)]
    await admin.create_topics([NewTopic(name, partitions, 1) for name in names])
    return names


def every_partition_once(assignments: list[list[TP]], topics: Sequence[str], count: int) -> bool:
    flat = [tp for held in assignments for tp in held]
    return sorted(flat) == sorted(TP(t, p) for t in topics for p in range(count))


@pytest.mark.timeout(120)
async def test_sticky_group_of_3_assigns_6_partitions_once_and_balanced(
    admin: AIOKafkaAdminClient, group_factory: Callable[[Sequence[str]], Group]
) -> None:
    topics = await create_topics(admin, 6, 1)
    group = group_factory(topics)
    await group.join(make_sticky_assignor, 3)

    held = await group.settled()

    assert every_partition_once(held, topics, 6)
    assert [len(h) for h in held] == [2, 2, 2]


@pytest.mark.timeout(120)
async def test_sticky_group_members_keep_their_partitions_when_one_leaves(
    admin: AIOKafkaAdminClient, group_factory: Callable[[Sequence[str]], Group]
) -> None:
    topics = await create_topics(admin, 6, 1)
    group = group_factory(topics)
    await group.join(make_sticky_assignor, 3)
    before = await group.settled()

    await group.leave(0)  # tansu's first generation is 0, so the group notices by session timeout
    after = await group.settled()

    assert every_partition_once(after, topics, 6)
    assert [len(h) for h in after] == [3, 3]
    assert all(set(old) <= set(new) for old, new in zip(before[1:], after, strict=True))


@pytest.mark.timeout(120)
async def test_stream_join_group_gives_each_member_the_same_numbers_of_both_topics(
    admin: AIOKafkaAdminClient, group_factory: Callable[[Sequence[str]], Group]
) -> None:
    topics = await create_topics(admin, 4, 2)
    group = group_factory(topics)
    await group.join(make_stream_join_assignor, 3)

    held = await group.settled()

    assert every_partition_once(held, topics, 4)
    numbers = [{t: {tp.partition for tp in h if tp.topic == t} for t in topics} for h in held]
    assert all(per_topic[topics[0]] == per_topic[topics[1]] for per_topic in numbers)
    assert sorted(len(per_topic[topics[0]]) for per_topic in numbers) == [1, 1, 2]


@pytest.mark.timeout(120)
async def test_stream_join_group_members_keep_their_numbers_when_one_leaves(
    admin: AIOKafkaAdminClient, group_factory: Callable[[Sequence[str]], Group]
) -> None:
    topics = await create_topics(admin, 4, 2)
    group = group_factory(topics)
    await group.join(make_stream_join_assignor, 3)
    before = await group.settled()

    await group.leave(0)
    after = await group.settled()

    assert every_partition_once(after, topics, 4)
    assert [len(h) for h in after] == [4, 4]  # two numbers of each of the two topics
    assert all(set(old) <= set(new) for old, new in zip(before[1:], after, strict=True))


@pytest.mark.timeout(120)
async def test_lag_aware_group_spreads_the_lag_given_by_its_source(
    admin: AIOKafkaAdminClient, group_factory: Callable[[Sequence[str]], Group]
) -> None:
    topics = await create_topics(admin, 6, 1)
    lags = {TP(topics[0], 0): 100, TP(topics[0], 1): 90, TP(topics[0], 2): 80}
    group = group_factory(topics)
    await group.join(lambda: make_lag_aware_assignor(lambda _: lags), 3)

    held = await group.settled()

    # by decreasing lag, each to the member with fewest partitions, then least lag
    assert sorted([tp.partition for tp in h] for h in held) == [[0, 5], [1, 4], [2, 3]]


@pytest.mark.timeout(120)
async def test_lag_aware_group_without_a_source_balances_counts(
    admin: AIOKafkaAdminClient, group_factory: Callable[[Sequence[str]], Group]
) -> None:
    topics = await create_topics(admin, 6, 1)
    group = group_factory(topics)
    await group.join(make_lag_aware_assignor, 3)

    held = await group.settled()

    assert sorted([tp.partition for tp in h] for h in held) == [[0, 3], [1, 4], [2, 5]]
