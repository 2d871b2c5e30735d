"""Turn stored records into envelopes and task outputs into producer records (serdes)."""

from __future__ import annotations

from collections.abc import Callable

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
        self._targets: dict[str, tuple[str, str, Serde, Serde]] = {}

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

    def decoder(self, ssp: SystemStreamPartition) -> Callable[[Record], Envelope]:
        """`decode` bound to one SSP: the per-record hot path, with its serdes looked up once."""
        qualified = f"{ssp.system}.{ssp.stream}"
        key_from, value_from = (serde.from_bytes for serde in self.serdes(qualified))

        def decode_record(record: Record) -> Envelope:
            try:
                key = None if record.key is None else key_from(record.key)
                value = None if record.value is None else value_from(record.value)
            except Exception:
                self.decode(ssp, record)  # raises the SerdeError naming SSP, offset and serde
                raise
            return Envelope(ssp, record.offset, key, value, record.timestamp,
                            dict(record.headers) if record.headers else {})

        return decode_record

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
        target = self._targets.get(message.stream)
        if target is None:
            stream = self._config.stream(message.stream)
            target = (stream.system, stream.stream, *self.serdes(message.stream))
            self._targets[message.stream] = target
        system, name, key_serde, value_serde = target
        key = encode(key_serde, message.key, part="key", stream=message.stream)
        value = encode(value_serde, message.value, part="value", stream=message.stream)
        headers = tuple(sorted(message.headers.items())) if message.headers else ()
        return system, ProducerRecord(
            name, key, value, partition=message.partition,
            timestamp=message.timestamp, headers=headers,
        )
