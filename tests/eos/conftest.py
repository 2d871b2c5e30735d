"""Exactly-once tests on librdkafka's mock cluster (see `tests/kafka_mock.py`)."""

from kafka_mock import kafka_mock

__all__ = ["kafka_mock"]
