"""Dead-letter records: the raw bytes of a record that could not be decoded, plus why."""

from __future__ import annotations

import base64
import json

from framework.errors import SerdeError
from framework.systems.base import ProducerRecord, Record
from groupers import SystemStreamPartition


def dead_letter_record(
    stream: str, ssp: SystemStreamPartition, record: Record, error: SerdeError
) -> ProducerRecord:
    """A JSON record naming the source SSP and offset, the error, and the raw key/value.

    The key keeps the original key bytes, so dead letters of one key share a partition.
    """

    def b64(data: bytes | None) -> str | None:
        return None if data is None else base64.b64encode(data).decode()

    body = {
        "system": ssp.system,
        "stream": ssp.stream,
        "partition": ssp.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "error": str(error),
        "key_base64": b64(record.key),
        "value_base64": b64(record.value),
    }
    return ProducerRecord(stream, record.key, json.dumps(body).encode(),
                          headers=record.headers)
