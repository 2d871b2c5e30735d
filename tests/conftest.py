"""Shared fixtures: the session's tansu Kafka broker (see `tests/kafka_broker.py`) and the
one local Spark session of the test run."""

from collections.abc import Iterator
from typing import Any

import pytest
from kafka_broker import kafka_broker

__all__ = ["kafka_broker", "spark"]


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
