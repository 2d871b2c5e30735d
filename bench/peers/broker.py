"""The suite's Apache Kafka launchers (`tests/kafka_broker.py`), for the bench."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from kafka_broker import (  # type: ignore[import-not-found,unused-ignore]
    KAFKA_VERSION,
    KafkaCluster,
    running_kafka,
    start_kafka,
)

__all__ = ["KAFKA_VERSION", "KafkaCluster", "running_kafka", "start_kafka"]
