"""Dead-letter records: the raw bytes of a record a task could not take, plus why.

Two kinds land in ``[errors] dead_letter_stream``: records the serdes could not decode
(``errors.policy``) and records whose `process` raised (``errors.process_policy``); the
second carry the task name and the traceback.
"""

from __future__ import annotations

import base64
import json

from framework.systems.base import ProducerRecord, Record
from groupers import SystemStreamPartition

__all__ = ["dead_letter_record"]


def dead_letter_record(
    stream: str, ssp: SystemStreamPartition, record: Record, error: BaseException, *,
    task: str | None = None, traceback: str | None = None,
) -> ProducerRecord:
    """A JSON record naming the source SSP and offset, the error, and the raw key/value.

    The key keeps the original key bytes, so dead letters of one key share a partition.
    """

    def b64(data: bytes | None) -> str | None:
        return None if data is None else base64.b64encode(data).decode()

    body = {
        "kind": "decode" if task is None else "process",
        "system": ssp.system,
        "stream": ssp.stream,
        "partition": ssp.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "error": str(error) if task is None else f"{type(error).__name__}: {error}",
        "key_base64": b64(record.key),
        "value_base64": b64(record.value),
    }
    if task is not None:
        body["task"] = task
        body["traceback"] = traceback
    return ProducerRecord(stream, record.key, json.dumps(body).encode(),
                          headers=record.headers)
