"""`client_options.topic_configs` on real Apache Kafka: every topic sampan creates gets
them — streams and compacted changelogs alike — and settings sampan owns are refused."""

from __future__ import annotations

import os
from typing import Any

import pytest

from framework.errors import ConfigError
from framework.systems.kafka.options import KafkaOptions
from framework.systems.kafka.system import KafkaSystem


async def test_every_topic_sampan_creates_gets_the_topic_configs(kafka_broker: Any) -> None:
    space = f"tc{os.getpid()}-{os.urandom(3).hex()}."
    system = KafkaSystem("kafka", kafka_broker.bootstrap, {
        "namespace": space,
        "topic_configs": {"retention.ms": "86400001", "max.message.bytes": 2_000_000}})
    await system.start()
    try:
        await system.create_stream("events", 2)
        await system.create_stream("counts-changelog", 2, compacted=True)
        events = await system.admin.stream_configs("events", "a test")
        changelog = await system.admin.stream_configs("counts-changelog", "a test")
        assert (events["retention.ms"], events["max.message.bytes"]) == (
            "86400001", "2000000")
        assert events["cleanup.policy"] == "delete"
        assert (changelog["retention.ms"], changelog["max.message.bytes"]) == (
            "86400001", "2000000")
        assert changelog["cleanup.policy"] == "compact"
        await system.delete_streams(["events", "counts-changelog"])
    finally:
        await system.close()


async def test_without_topic_configs_topics_keep_the_brokers_defaults(
        kafka_broker: Any) -> None:
    space = f"tc{os.getpid()}-{os.urandom(3).hex()}."
    system = KafkaSystem("kafka", kafka_broker.bootstrap, {"namespace": space})
    await system.start()
    try:
        await system.create_stream("events", 1)
        configs = await system.admin.stream_configs("events", "a test")
        assert configs["max.message.bytes"] == "1048588"  # Kafka's default
        assert configs["retention.ms"] != "86400001"
        await system.delete_streams(["events"])
    finally:
        await system.close()


@pytest.mark.parametrize(("given", "named"), [
    ({"cleanup.policy": "compact"}, "cleanup.policy is sampan's"),
    ("retention.ms=-1", "must be a table of Kafka topic configs"),
    ({"retention.ms": True}, "must be a table of Kafka topic configs"),
])
def test_topic_configs_sampan_cannot_honour_are_refused_naming_the_key(
        given: Any, named: str) -> None:
    with pytest.raises(ConfigError, match=named) as caught:
        KafkaOptions.from_mapping("kafka", {"topic_configs": given})
    assert "[systems.kafka.client_options] topic_configs" in str(caught.value)
