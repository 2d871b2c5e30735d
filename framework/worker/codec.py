"""Turn stored records into envelopes and task outputs into producer records (serdes)."""

from __future__ import annotations

from framework.api import Envelope, OutgoingMessage
from framework.config import JobConfig
from framework.serdes import Serde, decode, encode, get_serde
from framework.systems.base import ProducerRecord, Record
from groupers import SystemStreamPartition

__all__ = ["RecordCodec"]


class RecordCodec:
    """Serdes of every declared stream, resolved once (custom ones from the job's folder)."""

    def __init__(self, config: JobConfig) -> None:
        self._config = config
        self._serdes: dict[str, tuple[Serde, Serde]] = {}

    def serdes(self, qualified: str) -> tuple[Serde, Serde]:
        """(key serde, value serde) of a declared stream."""
        found = self._serdes.get(qualified)
        if found is None:
            stream = self._config.stream(qualified)
            root = self._config.root
            found = (get_serde(stream.key_serde, search_path=root),
                     get_serde(stream.value_serde, search_path=root))
            self._serdes[qualified] = found
        return found

    def decode(self, ssp: SystemStreamPartition, record: Record) -> Envelope:
        """The envelope of ``record``; `SerdeError` names SSP, offset and serde."""
        qualified = f"{ssp.system}.{ssp.stream}"
        key_serde, value_serde = self.serdes(qualified)
        key = record.key
        if key is not None:
            try:
                key = key_serde.from_bytes(key)
            except Exception:  # again through `decode`, for the message naming everything
                decode(key_serde, record.key, part="key", stream=qualified,
                       partition=ssp.partition, offset=record.offset)
                raise
        value = record.value
        if value is not None:
            try:
                value = value_serde.from_bytes(value)
            except Exception:
                decode(value_serde, record.value, part="value", stream=qualified,
                       partition=ssp.partition, offset=record.offset)
                raise
        return Envelope(ssp, record.offset, key, value, record.timestamp,
                        dict(record.headers) if record.headers else {})

    def encode(self, message: OutgoingMessage) -> tuple[str, ProducerRecord]:
        """(system name, record) for a task's output; `SerdeError` names the stream."""
        stream = self._config.stream(message.stream)
        key_serde, value_serde = self.serdes(message.stream)
        key = encode(key_serde, message.key, part="key", stream=message.stream)
        value = encode(value_serde, message.value, part="value", stream=message.stream)
        headers = tuple(sorted(message.headers.items())) if message.headers else ()
        return stream.system, ProducerRecord(
            stream.stream, key, value, partition=message.partition,
            timestamp=message.timestamp, headers=headers,
        )
