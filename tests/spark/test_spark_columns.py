"""Column-wise decoding and the read_committed batch filter of the bulk read path (no Spark).

Every decoded cell must equal what a per-record decode gives: ``render(serde.from_bytes(b))``.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from framework.config.serdes import get_serde
from framework.errors import SerdeError
from framework.spark.arrow_columns import (
    ColumnDecoder,
    arrow_schema,
    headers_array,
    record_batch,
    render,
)
from framework.spark.kafka_fetch import ABORT, COMMIT, CommittedBatches

CELLS: dict[str, list[bytes | None]] = {
    "string": [b"apple", None, "k\u00e9y".encode(), b"", b"apple"],
    "bytes": [b"\x00raw", None, b"text", b"\xff\xfe"],
    "json": [b'{"seq": 1}', b'{"seq":1}', None, b'[1, 2.5, "x"]', b'"text"', b"7", b"null",
             b'{"n": 1e16}', b'{"\\u00e9": "\\n"}', b'{"seq": 1}', b'NaN', b'[-Infinity]',
             b'{"big": 123456789012345678901234}', b'[18446744073709551615, -9223372036854775808]',
             b'{"f": 0.1, "e": 1E-7, "s": "v1.2"}', b'{"a": {"b": [true, false, null]}}',
             '{"\u2028": "\x7f\u00e9\U0001f600"}'.encode()],
    "int64": [get_serde("int64").to_bytes(n) for n in (0, -3, 1 << 40)] + [None],
    "msgpack": [get_serde("msgpack").to_bytes(v) for v in ({"a": [1, b"x"]}, "s", 3, None)],
}


def _per_record(serde_name: str, cells: list[bytes | None]) -> list[str | None]:
    serde = get_serde(serde_name)
    return [None if cell is None else render(serde.from_bytes(cell)) for cell in cells]


@pytest.mark.parametrize("serde_name", sorted(CELLS))
def test_column_decoding_equals_the_per_record_decode(serde_name: str) -> None:
    cells = CELLS[serde_name]
    decoder = ColumnDecoder(get_serde(serde_name), "value", "local.s")

    decoded = decoder(pa.array(cells, pa.binary()), list(range(len(cells))), 0)

    assert decoded.type == pa.string()
    assert decoded.to_pylist() == _per_record(serde_name, cells)


def test_bytes_serde_renders_invalid_utf8_with_replacement_characters() -> None:
    decoder = ColumnDecoder(get_serde("bytes"), "key", "local.s")

    decoded = decoder(pa.array([b"ok", b"\xff"], pa.binary()), [0, 1], 0)

    assert decoded.to_pylist() == ["ok", "\ufffd"]


def test_string_serde_names_the_offset_of_invalid_utf8() -> None:
    decoder = ColumnDecoder(get_serde("string"), "key", "local.words")

    with pytest.raises(SerdeError, match=r"key of local\.words\[3\] offset 41 .*'string'"):
        decoder(pa.array([b"fine", b"\xff"], pa.binary()), [40, 41], 3)


def test_json_serde_names_the_offset_of_a_malformed_value() -> None:
    decoder = ColumnDecoder(get_serde("json"), "value", "local.words")

    with pytest.raises(SerdeError, match=r"value of local\.words\[0\] offset 8 .*'json'"):
        decoder(pa.array([b"1", b"{oops", b"1"], pa.binary()), [7, 8, 9], 0)


def test_headers_column_keeps_each_records_pairs_and_empty_lists() -> None:
    headers: list[Any] = [(), (("a", b"1"), ("b", b"")), (), (("c", b"\x00"),)]

    column = headers_array(headers)

    assert column.to_pylist() == [
        [], [{"key": "a", "value": b"1"}, {"key": "b", "value": b""}], [],
        [{"key": "c", "value": b"\x00"}]]
    assert headers_array([(), ()]).to_pylist() == [[], []]


def test_record_batch_has_the_datasource_schema() -> None:
    columns = ([5, 9], [b"k", None], [None, b'{"a":1}'], [100, 200], [(), (("h", b"v"),)])
    decoders = (ColumnDecoder(get_serde("string"), "key", "local.s"),
                ColumnDecoder(get_serde("json"), "value", "local.s"))

    decoded = record_batch(columns, 2, arrow_schema(False), decoders)
    raw = record_batch(columns, 2, arrow_schema(True), None)

    assert decoded.schema == arrow_schema(False)
    assert decoded.to_pylist() == [
        {"key": "k", "value": None, "partition": 2, "offset": 5, "timestamp": 100,
         "headers": []},
        {"key": None, "value": '{"a":1}', "partition": 2, "offset": 9, "timestamp": 200,
         "headers": [{"key": "h", "value": b"v"}]}]
    assert raw.schema == arrow_schema(True)
    assert raw.column("key").to_pylist() == [b"k", None]


# -- read_committed over record batches ------------------------------------------------------

def _feed(batches: list[tuple[Any, ...]], aborted: list[tuple[int, int]] = ()) -> tuple[
        list[int], bool]:
    """Push ``(kind, base, offsets, producer, epoch)`` batches; kind is data, txn, COMMIT or
    ABORT. Returns the released offsets and whether records are still held."""
    committed = CommittedBatches()
    committed.broker_aborted(aborted)
    out: list[int] = []
    for kind, base, offsets, producer, epoch in batches:
        if kind in ("data", "txn"):
            committed.push(offsets, out, base_offset=base, producer_id=producer, epoch=epoch,
                           transactional=kind == "txn")
        else:
            committed.push((), out, base_offset=base, producer_id=producer, epoch=epoch,
                           transactional=True, control=kind)
    return out, committed.holding


def test_plain_batches_pass_through() -> None:
    assert _feed([("data", 0, [0, 1], -1, 0), ("data", 2, [2], 7, 0)]) == ([0, 1, 2], False)


def test_a_transaction_is_held_until_commit_with_what_follows_it() -> None:
    assert _feed([
        ("txn", 0, [0, 1], 7, 0), ("data", 2, [2], -1, 0), ("txn", 3, [3], 7, 0),
        (COMMIT, 4, [], 7, 0), ("data", 5, [5], -1, 0),
    ]) == ([0, 1, 2, 3, 5], False)


def test_an_aborted_transaction_is_dropped_and_the_rest_released() -> None:
    assert _feed([
        ("txn", 0, [0], 7, 0), ("txn", 1, [1], 8, 0), ("data", 2, [2], -1, 0),
        (ABORT, 3, [], 7, 0), (COMMIT, 4, [], 8, 0),
    ]) == ([1, 2], False)


def test_transactions_the_broker_lists_as_aborted_are_dropped() -> None:
    assert _feed([("txn", 0, [0], 7, 0), ("txn", 1, [1], 8, 0), (ABORT, 2, [], 7, 0),
                  (COMMIT, 3, [], 8, 0)], aborted=[(7, 0)]) == ([1], False)


def test_a_newer_producer_epoch_aborts_the_open_transaction() -> None:
    assert _feed([("txn", 0, [0], 7, 0), ("txn", 1, [1], 7, 1), (COMMIT, 2, [], 7, 1)]) == (
        [1], False)


def test_an_undecided_transaction_stays_held_with_everything_after_it() -> None:
    assert _feed([("data", 0, [0], -1, 0), ("txn", 1, [1], 7, 0), ("data", 2, [2], -1, 0)]) == (
        [0], True)
