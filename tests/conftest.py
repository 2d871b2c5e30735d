"""Shared fixtures: the session's tansu Kafka broker (see `tests/kafka_broker.py`) and the
one local Spark session of the test run."""

from collections.abc import Iterator
from typing import Any

import pytest
from kafka_broker import kafka_broker

__all__ = ["kafka_broker", "spark"]

SLOW = {"coordinator", "drill", "examples", "kafka", "eos", "spark", "windows", "docs",
        "hosts"}
"""Test folders whose tests run real processes, brokers or Spark."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `slow` by folder and `kafka` by fixture, so `-m 'not slow'` is a quick loop."""
    for item in items:
        parts = item.path.parts
        if "tests" in parts and SLOW & set(parts[parts.index("tests") + 1:-1]):
            item.add_marker(pytest.mark.slow)
        if {"kafka", "eos", "hosts"} & set(parts) or {"kafka_broker", "kafka_mock"} & set(
                getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.kafka)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A ``local[2]`` loopback session, UI off, 2 shuffle partitions, ``sampan`` registered;
    one for every Spark test of the run (starting one costs seconds)."""
    from framework.spark import local_session

    session = local_session("local[2]", app="sampan-tests")
    session.conf.set("spark.sql.shuffle.partitions", "2")
    try:
        yield session
    finally:
        session.stop()
