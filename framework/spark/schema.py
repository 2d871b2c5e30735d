"""The DataSource's rows as Spark DDL: ``key, value, partition, offset, timestamp, headers``.

Apart from `framework.spark.arrow_columns` so that Spark's planner processes, which only ask
the DataSource for its schema and partitions, need not import pyarrow to learn it.
"""

from __future__ import annotations

__all__ = ["DECODED_SCHEMA", "RAW_SCHEMA"]

RAW_SCHEMA = (
    "key binary, value binary, partition int, offset bigint, timestamp bigint, "
    "headers array<struct<key: string, value: binary>>"
)
DECODED_SCHEMA = RAW_SCHEMA.replace("key binary, value binary", "key string, value string")
