"""Dead-letter records: the raw bytes of a record a task could not take, plus why.

Two kinds land in ``[errors] dead_letter_stream``: records the serdes could not decode
(``errors.policy``) and records whose `process` raised (``errors.process_policy``); the
second carry the task name and the traceback.
"""

from __future__ import annotations

import base64
import json
from typing import Any, Protocol

from framework.systems.base import ProducerRecord, Record
from groupers import SystemStreamPartition

__all__ = ["dead_letter_record"]


class _Serde(Protocol):
    def to_bytes(self, obj: Any) -> bytes: ...

    def from_bytes(self, data: bytes) -> Any: ...


def _key(original: bytes | None, serde: _Serde | None) -> bytes | None:
    """The original key when the dead-letter stream's key serde reads it, else a text form
    of it (``base64:…``) in that serde, else none: a dead letter is always readable."""
    if original is None or serde is None:
        return original
    try:
        serde.from_bytes(original)
        return original
    except Exception:
        pass
    try:
        text = serde.to_bytes("base64:" + base64.b64encode(original).decode())
        serde.from_bytes(text)
        return text
    except Exception:
        return None


def _value(body: dict[str, Any], serde: _Serde | None) -> bytes:
    """The body in the dead-letter stream's value serde (JSON, msgpack…), or as JSON text
    for string and bytes serdes."""
    text = json.dumps(body)
    if serde is not None:
        for form in (body, text, text.encode()):
            try:
                data = serde.to_bytes(form)
                serde.from_bytes(data)
                return data
            except Exception:
                continue
    return text.encode()


def dead_letter_record(
    stream: str, ssp: SystemStreamPartition, record: Record, error: BaseException, *,
    task: str | None = None, traceback: str | None = None,
    serdes: tuple[_Serde, _Serde] | None = None,
) -> ProducerRecord:
    """A record naming the source SSP and offset, the error, and the raw key/value, written
    with the dead-letter stream's ``serdes`` (key, value) so that it reads back with them.

    The key keeps the original key bytes where that serde reads them, so dead letters of
    one key share a partition.
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
    key_serde, value_serde = serdes if serdes is not None else (None, None)
    return ProducerRecord(stream, _key(record.key, key_serde), _value(body, value_serde),
                          headers=record.headers)
