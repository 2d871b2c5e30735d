"""Fixtures of the worker tests."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["local", "kafka"])
def where(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    """The metadata system and, for Kafka, the session broker (sync: it starts its own
    event loop)."""
    if request.param == "local":
        return "local", None
    return "kafka", request.getfixturevalue("kafka_broker").bootstrap
