"""One broker's metadata answer that lacks a stream seen before does not make the stream
missing: seen in a full run, a worker stopped with "stream … does not exist" while a node
of a 3-node cluster was killed, and the job counted a restart."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.errors import TopicAlreadyExistsError

from framework.errors import StreamNotFoundError
from framework.systems.kafka.admin import KafkaAdmin
from framework.systems.kafka.options import KafkaOptions


class _Answers:
    """Stands in for the admin client: each metadata request gets the next answer."""

    answered_by = 2

    def __init__(self, answers: list[list[str]]) -> None:
        self._answers: Iterator[list[str]] = iter(answers)
        self.asked = 0

    async def create_topics(self, topics: list[Any]) -> Any:
        """Another process created the topic first: TopicAlreadyExists."""
        return SimpleNamespace(topic_errors=[(t.name, TopicAlreadyExistsError.errno, "exists")
                                             for t in topics])

    async def ask(self, request: Any) -> Any:
        """A metadata request naming topics: none of them exists (UNKNOWN_TOPIC_OR_PART)."""
        return SimpleNamespace(topics=[(3, topic, False, []) for topic in request._topics])

    async def describe_topics(self) -> list[dict[str, Any]]:
        self.asked += 1
        topics = next(self._answers)
        return [{"topic": t, "error_code": 0, "partitions": [{}] * 4} for t in topics]


def _admin(answers: list[list[str]], timeout_s: float = 5.0) -> tuple[KafkaAdmin, _Answers]:
    admin = KafkaAdmin("kafka", "127.0.0.1:9", KafkaOptions(timeout_s=timeout_s))
    fake = _Answers(answers)
    admin._admin = fake  # type: ignore[assignment]
    return admin, fake


def test_a_stream_missing_from_one_answer_is_asked_for_again(
        caplog: pytest.LogCaptureFixture) -> None:
    admin, fake = _admin([["events", "checkpoints"], ["events"], ["events", "checkpoints"]])

    async def run() -> tuple[dict[str, int], dict[str, int]]:
        first = await admin.partition_counts(["checkpoints"])
        return first, await admin.partition_counts(["checkpoints", "events"])

    with caplog.at_level(logging.WARNING, "framework.systems.kafka.admin"):
        first, second = asyncio.run(run())
    assert first == {"checkpoints": 4}
    assert second == {"checkpoints": 4, "events": 4}
    assert fake.asked == 3
    assert [r.getMessage() for r in caplog.records] == [
        "Kafka at 127.0.0.1:9: broker 2 answered metadata without stream(s) checkpoints seen "
        "before; asking again for up to 5 s"]


def test_a_stream_gone_for_longer_than_the_timeout_is_missing() -> None:
    admin, fake = _admin([["events", "checkpoints"]] + [["events"]] * 100, timeout_s=0.5)

    async def run() -> None:
        await admin.partition_counts(["checkpoints"])
        await admin.partition_counts(["checkpoints"])

    with pytest.raises(StreamNotFoundError, match="stream 'checkpoints' does not exist"):
        asyncio.run(run())
    assert 2 < fake.asked < 10  # asked again while the timeout lasted, then gave up


def test_a_stream_never_seen_is_missing_at_once() -> None:
    admin, fake = _admin([["events"], ["events"]])
    with pytest.raises(StreamNotFoundError, match=re.escape("sampan streams create kafka.orders")):
        asyncio.run(admin.partition_counts(["orders"]))
    assert fake.asked == 1


def test_a_stream_another_process_just_created_is_waited_for_then_trusted() -> None:
    """Seen in a full run on the 3-node cluster: two workers create the job's checkpoints
    topic at once; the second's CreateTopics says it exists, and a broker that had not yet
    learnt of it answered the next metadata request: the worker stopped with "does not
    exist". Creation now waits until metadata shows the stream, and a later answer without
    it is asked again."""
    admin, fake = _admin([["events"], ["events"], ["events", "checkpoints"], ["events"],
                          ["events", "checkpoints"]])

    async def run() -> dict[str, int]:
        await admin.create_stream("checkpoints", 1, compacted=True, exist_ok=True)
        return await admin.partition_counts(["checkpoints"])

    assert asyncio.run(run()) == {"checkpoints": 4}
    assert fake.asked == 5
