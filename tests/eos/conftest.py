"""Exactly-once tests on librdkafka's mock cluster (see `tests/kafka_mock.py`)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))  # jobs.harness

from kafka_mock import kafka_mock

__all__ = ["kafka_mock"]
