"""Turn stored records into envelopes and task outputs into producer records (serdes)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from framework.api import Envelope, OutgoingMessage
from framework.config import JobConfig
from framework.frozen import fast_constructor
from framework.serdes import Serde, StringSerde, decode, encode, get_serde
from framework.systems.base import ProducerRecord, Record
from groupers import SystemStreamPartition

__all__ = ["RecordCodec", "Sent", "producer_record"]

Sent = tuple[str, Any, Any, "int | None", "int | None", "Mapping[str, bytes] | None"]
"""(stream, key, value, partition, timestamp, headers) of one `MessageCollector.send`: a
plain tuple, the cheapest record of a send (`TaskInstance.take_outputs`)."""

_envelope = fast_constructor(Envelope)
producer_record = fast_constructor(ProducerRecord)
"""``ProducerRecord(stream, key, value, partition, timestamp, headers)`` built the cheap way."""
_NO_HEADERS: Mapping[str, bytes] = MappingProxyType({})
"""The headers of every envelope without any (read-only, so one can be shared)."""


def _from_bytes(serde: Serde) -> Callable[[bytes], Any]:
    """``serde.from_bytes``, or what it amounts to for bytes input where that is a builtin
    (a failure still goes through ``serde`` again, for its error)."""
    if type(serde) is StringSerde:
        return bytes.decode
    return serde.from_bytes


def _to_bytes(serde: Serde) -> Callable[[Any], bytes]:
    """``serde.to_bytes``, or ``str.encode`` for the string serde (a non-str then fails
    and goes through ``serde`` again, for its error)."""
    if type(serde) is StringSerde:
        return str.encode
    return serde.to_bytes


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
        key_from, value_from = (_from_bytes(serde) for serde in self.serdes(qualified))

        def decode_record(record: Record) -> Envelope:
            try:
                key = None if record.key is None else key_from(record.key)
                value = None if record.value is None else value_from(record.value)
            except Exception:  # the careful path: the SerdeError naming SSP, offset, serde
                return self.decode(ssp, record)
            headers = record.headers
            return _envelope(ssp, record.offset, key, value, record.timestamp,
                             dict(headers) if headers else _NO_HEADERS)

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

    def _target(self, qualified: str) -> tuple[str, str, Serde, Serde]:
        target = self._targets.get(qualified)
        if target is None:
            stream = self._config.stream(qualified)
            target = (stream.system, stream.stream, *self.serdes(qualified))
            self._targets[qualified] = target
        return target

    def encode_all(self, sent: Sequence[Sent]) -> dict[str, list[ProducerRecord]]:
        """Every send of a commit as records, per system, in the order sent: serdes
        looked up once per run of one stream; `SerdeError` names the stream."""
        out: dict[str, list[ProducerRecord]] = {}
        last: str | None = None
        for one in sent:
            stream, key, value, partition, timestamp, headers = one
            if stream != last:
                system, name, key_serde, value_serde = self._target(stream)
                key_to, value_to = _to_bytes(key_serde), _to_bytes(value_serde)
                bucket = out.setdefault(system, [])
                last = stream
            try:
                raw_key = None if key is None else key_to(key)
                raw_value = None if value is None else value_to(value)
                plain = ((raw_key is None or type(raw_key) is bytes)
                         and (raw_value is None or type(raw_value) is bytes))
            except Exception:
                plain = False
            if not plain:  # the careful path: the SerdeError naming the stream, or bytes()
                bucket.append(self.encode(OutgoingMessage(*one))[1])
                continue
            bucket.append(producer_record(
                name, raw_key, raw_value, partition, timestamp,
                tuple(sorted(headers.items())) if headers else ()))
        return out

    def encode(self, message: OutgoingMessage) -> tuple[str, ProducerRecord]:
        """(system name, record) for a task's output; `SerdeError` names the stream."""
        system, name, key_serde, value_serde = self._target(message.stream)
        key = encode(key_serde, message.key, part="key", stream=message.stream)
        value = encode(value_serde, message.value, part="value", stream=message.stream)
        headers = tuple(sorted(message.headers.items())) if message.headers else ()
        return system, ProducerRecord(
            name, key, value, partition=message.partition,
            timestamp=message.timestamp, headers=headers,
        )
