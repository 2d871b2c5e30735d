"""Turn stored records into envelopes and task outputs into producer records (serdes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from framework.api import Envelope, OutgoingMessage
from framework.config import JobConfig
from framework.errors import SerdeError
from framework.serdes import Serde, get_serde
from framework.systems.base import ProducerRecord, Record
from groupers import SystemStreamPartition

__all__ = ["RecordCodec"]


def _apply(
    function: Callable[[Any], Any], data: Any, *, what: str, serde: Serde
) -> Any:
    if data is None:
        return None
    try:
        return function(data)
    except SerdeError:
        raise
    except Exception as error:
        raise SerdeError(f"cannot {what} with serde {serde.name!r}: {error}") from error


class RecordCodec:
    """Serdes of every declared stream, resolved once."""

    def __init__(self, config: JobConfig) -> None:
        self._config = config
        self._serdes: dict[str, tuple[Serde, Serde]] = {}

    def serdes(self, qualified: str) -> tuple[Serde, Serde]:
        """(key serde, value serde) of a declared stream."""
        found = self._serdes.get(qualified)
        if found is None:
            stream = self._config.stream(qualified)
            found = (get_serde(stream.key_serde), get_serde(stream.value_serde))
            self._serdes[qualified] = found
        return found

    def decode(self, ssp: SystemStreamPartition, record: Record) -> Envelope:
        """The envelope of ``record``; `SerdeError` names SSP, offset and serde."""
        key_serde, value_serde = self.serdes(f"{ssp.system}.{ssp.stream}")
        place = f"{ssp.system}.{ssp.stream}[{ssp.partition}] offset {record.offset}"
        return Envelope(
            ssp=ssp,
            offset=record.offset,
            key=_apply(key_serde.from_bytes, record.key, what=f"decode key of {place}",
                       serde=key_serde),
            value=_apply(value_serde.from_bytes, record.value,
                         what=f"decode value of {place}", serde=value_serde),
            timestamp=record.timestamp,
            headers=dict(record.headers),
        )

    def encode(self, message: OutgoingMessage) -> tuple[str, ProducerRecord]:
        """(system name, record) for a task's output; `SerdeError` names the stream."""
        stream = self._config.stream(message.stream)
        key_serde, value_serde = self.serdes(message.stream)
        key = _apply(key_serde.to_bytes, message.key,
                     what=f"encode key for {message.stream}", serde=key_serde)
        value = _apply(value_serde.to_bytes, message.value,
                       what=f"encode value for {message.stream}", serde=value_serde)
        headers = tuple(sorted((message.headers or {}).items()))
        return stream.system, ProducerRecord(
            stream.stream, key, value, partition=message.partition,
            timestamp=message.timestamp, headers=headers,
        )
