"""Shared fixtures: the session's tansu Kafka broker (see `tests/kafka_broker.py`)."""

from kafka_broker import kafka_broker

__all__ = ["kafka_broker"]
