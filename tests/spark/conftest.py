"""One local Spark session for every Spark test (starting one costs seconds)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A ``local[2]`` loopback session, UI off, 2 shuffle partitions, ``sampan`` registered."""
    from framework.spark import local_session

    session = local_session("local[2]", app="sampan-tests")
    session.conf.set("spark.sql.shuffle.partitions", "2")
    try:
        yield session
    finally:
        session.stop()
