"""The worker builds its frozen records the cheap way; they stay ordinary frozen records."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from framework.api import Envelope
from framework.config import parse_config
from framework.errors import SerdeError
from framework.frozen import fast_constructor
from framework.systems.base import ProducerRecord, Record
from framework.worker.codec import RecordCodec
from groupers import SystemStreamPartition as SSP


def _codec(tmp_path: Path) -> RecordCodec:
    config = parse_config({
        "job": {"name": "j", "task": "t:T", "inputs": ["local.in"]},
        "systems": {"local": {"type": "local"}},
        "streams": {"local.in": {"key_serde": "string", "value_serde": "json"},
                    "local.out": {"key_serde": "string", "value_serde": "json"}},
    }, tmp_path / "job.toml")
    return RecordCodec(config)


def test_a_decoded_envelope_is_a_frozen_envelope_like_one_built_normally(tmp_path: Path) -> None:
    ssp = SSP("local", "in", 2)
    envelope = _codec(tmp_path).decoder(ssp)(Record(2, 7, b"k", b'{"n":1}', 5))
    assert type(envelope) is Envelope
    assert envelope == Envelope(ssp, 7, "k", {"n": 1}, 5, {})
    assert dataclasses.replace(envelope, offset=8).offset == 8
    with pytest.raises(dataclasses.FrozenInstanceError):
        envelope.key = "other"  # type: ignore[misc]


def test_sends_are_encoded_per_system_in_send_order(tmp_path: Path) -> None:
    sent = [("local.out", "a", 1, None, None, None), ("local.out", "b", {"x": 2}, 3, 9, None),
            ("local.out", "a", None, None, None, {"h": b"v"})]
    assert _codec(tmp_path).encode_all(sent) == {"local": [
        ProducerRecord("out", b"a", b"1"),
        ProducerRecord("out", b"b", b'{"x":2}', partition=3, timestamp=9),
        ProducerRecord("out", b"a", None, headers=(("h", b"v"),)),
    ]}


def test_a_send_that_cannot_be_encoded_fails_naming_the_stream(tmp_path: Path) -> None:
    with pytest.raises(SerdeError, match=r"local\.out"):
        _codec(tmp_path).encode_all([("local.out", 42, 1, None, None, None)])


def test_fast_constructor_refuses_a_class_whose_slots_are_not_its_fields() -> None:
    @dataclasses.dataclass(frozen=True)
    class Plain:
        x: int

    with pytest.raises(TypeError, match="slots dataclass"):
        fast_constructor(Plain)


class _ClientRecord:
    """A Kafka client's own record: no partition, a header may lack its value."""

    def __init__(self) -> None:
        self.offset, self.key, self.value, self.timestamp = 3, b"k", b'{"n":2}', 9
        self.headers = [("trace", b"t"), ("empty", None)]


def test_a_clients_record_decodes_with_missing_header_values_as_empty(tmp_path: Path) -> None:
    ssp = SSP("local", "in", 2)
    envelope = _codec(tmp_path).decoder(ssp)(_ClientRecord())
    assert envelope == Envelope(ssp, 3, "k", {"n": 2}, 9, {"trace": b"t", "empty": b""})
