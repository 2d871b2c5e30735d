"""Turn stored records into envelopes and task outputs into producer records (serdes)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

import orjson

from framework.api import Envelope, OutgoingMessage
from framework.config import JobConfig
from framework.config.serdes import JsonSerde, Serde, StringSerde, decode, encode, get_serde
from framework.frozen import fast_constructor
from framework.systems.base import (
    FetchedRecord,
    OutputColumns,
    ProducerRecord,
    ProducerRow,
    producer_row,
)
from groupers import SystemStreamPartition

__all__ = ["NO_HEADERS", "SHORT_JSON", "Decoding", "RecordCodec", "Sent", "envelope",
           "header_map", "producer_record"]

Outgoing = ProducerRow | ProducerRecord
"""A record to write, as a row for a system that takes rows (Kafka), else as a record."""

Sent = tuple[str, Any, Any, "int | None", "int | None", "Mapping[str, bytes] | None"]
"""(stream, key, value, partition, timestamp, headers) of one `MessageCollector.send`: a
plain tuple, the cheapest record of a send (`TaskInstance.take_outputs`)."""

envelope = fast_constructor(Envelope)
"""``Envelope(ssp, offset, key, value, timestamp, headers)`` built the cheap way."""
producer_record = fast_constructor(ProducerRecord)
"""``ProducerRecord(stream, key, value, partition, timestamp, headers)`` built the cheap way."""
NO_HEADERS: Mapping[str, bytes] = MappingProxyType({})
"""The headers of every envelope without any (read-only, so one can be shared)."""
SHORT_JSON = 19
"""JSON values shorter than this go straight to orjson: `JsonSerde.from_bytes` would too
(no 19-digit integer fits); what orjson refuses goes through the serde after all."""


class Decoding(NamedTuple):
    """One SSP's decoding on the hot path: ``key_from``/``value_from`` turn non-None bytes
    into objects; ``short_json`` (orjson's loads, for a JSON value serde) reads values
    shorter than `SHORT_JSON` bytes. Anything they raise goes to `RecordCodec.decode`,
    which either reads the record after all or raises the `SerdeError`."""

    key_from: Callable[[bytes], Any]
    value_from: Callable[[bytes], Any]
    short_json: Callable[[bytes], Any] | None


def header_map(headers: Sequence[tuple[str, bytes | None]]) -> dict[str, bytes]:
    """An envelope's headers: a missing value (a Kafka client's None) reads as b""."""
    return {name: value or b"" for name, value in headers}


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
        self._decodings: dict[SystemStreamPartition, Decoding] = {}

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

    def decoder(self, ssp: SystemStreamPartition) -> Callable[[FetchedRecord], Envelope]:
        """`decode` bound to one SSP, with its serdes looked up once."""
        qualified = f"{ssp.system}.{ssp.stream}"
        key_from, value_from = (_from_bytes(serde) for serde in self.serdes(qualified))

        def decode_record(record: FetchedRecord) -> Envelope:
            try:
                key = None if record.key is None else key_from(record.key)
                value = None if record.value is None else value_from(record.value)
            except Exception:  # the careful path: the SerdeError naming SSP, offset, serde
                return self.decode(ssp, record)
            headers = record.headers
            return envelope(ssp, record.offset, key, value, record.timestamp,
                            header_map(headers) if headers else NO_HEADERS)

        return decode_record

    def decoding(self, ssp: SystemStreamPartition) -> Decoding:
        """What the hot path (`framework.worker.dispatch`) decodes one SSP's records with,
        resolved once per SSP (see `Decoding`)."""
        found = self._decodings.get(ssp)
        if found is None:
            key_serde, value_serde = self.serdes(f"{ssp.system}.{ssp.stream}")
            found = self._decodings[ssp] = Decoding(
                _from_bytes(key_serde), _from_bytes(value_serde),
                orjson.loads if type(value_serde) is JsonSerde else None)
        return found

    def decode(self, ssp: SystemStreamPartition, record: FetchedRecord) -> Envelope:
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
                        header_map(record.headers) if record.headers else {})

    def _target(self, qualified: str) -> tuple[str, str, Serde, Serde]:
        target = self._targets.get(qualified)
        if target is None:
            stream = self._config.stream(qualified)
            target = (stream.system, stream.stream, *self.serdes(qualified))
            self._targets[qualified] = target
        return target

    def encode_all(self, sent: Sequence[Sent]) -> dict[str, list[ProducerRecord]]:
        """Every send of a commit as `ProducerRecord`s (`encode_rows` with no row system)."""
        return self.encode_rows(sent, frozenset())  # type: ignore[return-value]

    def encode_rows(self, sent: Sequence[Sent],
                    row_systems: Collection[str] | None = None) -> dict[str, list[Outgoing]]:
        """Every send of a commit, per system, in the order sent: as a row (a plain tuple
        of `ProducerRecord`'s fields) for the systems in ``row_systems`` (all when None),
        as a `ProducerRecord` for the others. Serdes are looked up once per run of one
        stream; `SerdeError` names the stream."""
        out: dict[str, list[Outgoing]] = {}
        last: str | None = None
        for one in sent:
            stream, key, value, partition, timestamp, headers = one
            if stream != last:
                system, name, key_serde, value_serde = self._target(stream)
                key_to, value_to = _to_bytes(key_serde), _to_bytes(value_serde)
                append = out.setdefault(system, []).append
                as_rows = row_systems is None or system in row_systems
                last = stream
            try:
                raw_key = None if key is None else key_to(key)
                raw_value = None if value is None else value_to(value)
                fast = ((type(raw_key) is bytes or raw_key is None)
                        and (type(raw_value) is bytes or raw_value is None))
            except Exception:
                fast = False
            if not fast:  # the careful path: the SerdeError naming the stream, or bytes()
                record = self.encode(OutgoingMessage(*one))[1]
                append(producer_row(record) if as_rows else record)
                continue
            pairs = tuple(sorted(headers.items())) if headers else ()
            append((name, raw_key, raw_value, partition, timestamp, pairs) if as_rows else
                   producer_record(name, raw_key, raw_value, partition, timestamp, pairs))
        return out

    def encode_columns(
        self, sent: Sequence[Sent], column_system: str, row_systems: Collection[str],
    ) -> tuple[list[OutputColumns], dict[str, list[Outgoing]]] | None:
        """Every send of a commit: those to ``column_system`` as one `OutputColumns` per
        stream (in the order sent), the others as `encode_rows` makes them. None as soon
        as a send to ``column_system`` is not plain (no key, an explicit partition, a
        timestamp or headers; a serde that fails or returns other than bytes): columns
        cannot carry it, `encode_rows` is the way (and raises the `SerdeError`)."""
        columns: dict[str, OutputColumns] = {}
        others: list[Sent] = []
        last: str | None = None
        mine = False
        key_to: Callable[[Any], Any]
        value_to: Callable[[Any], Any]
        add_key: Callable[[bytes], None]
        add_value: Callable[[bytes | None], None]
        for one in sent:
            stream, key, value, partition, timestamp, headers = one
            if stream != last:
                system, name, key_serde, value_serde = self._target(stream)
                last = stream
                mine = system == column_system
                if mine:
                    key_to, value_to = _to_bytes(key_serde), _to_bytes(value_serde)
                    found = columns.get(name)
                    if found is None:
                        found = columns[name] = OutputColumns(name, [], [])
                    add_key, add_value = found.keys.append, found.values.append
            if not mine:
                others.append(one)
                continue
            if key is None or partition is not None or timestamp is not None or headers:
                return None
            try:
                raw_key = key_to(key)
                raw_value = None if value is None else value_to(value)
            except Exception:
                return None
            if type(raw_key) is not bytes or not (raw_value is None
                                                  or type(raw_value) is bytes):
                return None
            add_key(raw_key)
            add_value(raw_value)
        return list(columns.values()), (self.encode_rows(others, row_systems) if others
                                        else {})

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
