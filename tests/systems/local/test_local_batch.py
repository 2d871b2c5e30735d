"""The local log's batch payload: every record round-trips exactly, any slice decodes."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.systems.base import Headers
from framework.systems.local.batch import (
    MAX_BATCH_BYTES,
    MAX_BATCH_RECORDS,
    BatchFormatError,
    batch_rows,
    decode_headers,
    decode_range,
    encode_batch,
    encode_headers,
)

blobs = (st.none() | st.binary(max_size=40)
         | st.binary(min_size=1020, max_size=1030))  # both sides of `_CODES`' end
headers = st.lists(st.tuples(st.text(max_size=8), st.binary(max_size=8)), max_size=3).map(tuple)
one = st.tuples(blobs, blobs, st.integers(-(1 << 63), (1 << 63) - 1), headers)


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[int], list[tuple[bytes | None, bytes | None, int,
                                                           Headers]]]:
    """Records with ascending offsets, dense or with gaps (as compaction leaves them)."""
    records = draw(st.lists(one, min_size=1, max_size=60))
    base = draw(st.integers(0, 1 << 40))
    gaps = draw(st.lists(st.integers(1, 5), min_size=len(records), max_size=len(records))
                | st.just([1] * len(records)))
    offsets = [base]
    for gap in gaps[1:]:
        offsets.append(offsets[-1] + gap)
    return offsets, records


def encode(offsets: list[int], records: list[tuple[bytes | None, bytes | None, int, Headers]]
           ) -> bytes:
    keys, values, timestamps, header_tuples = (list(c) for c in zip(*records, strict=True))
    return encode_batch(offsets[0], keys, values, timestamps,
                        [encode_headers(h) for h in header_tuples], offsets)


@settings(max_examples=100, deadline=None)
@given(batches())
def test_any_batch_round_trips_exactly(batch: tuple[list[int], list]) -> None:  # type: ignore[type-arg]
    offsets, records = batch
    decoded = decode_range(encode(offsets, records), 0, 1 << 62, 1 << 30)
    assert list(zip(*decoded, strict=True)) == [
        (offset, key, value, timestamp, h) for offset, (key, value, timestamp, h)
        in zip(offsets, records, strict=True)]


@settings(max_examples=100, deadline=None)
@given(batches(), st.data())
def test_any_offset_range_and_limit_decode_exactly_those_records(
        batch: tuple[list[int], list], data: st.DataObject) -> None:  # type: ignore[type-arg]
    offsets, records = batch
    start = data.draw(st.integers(offsets[0] - 3, offsets[-1] + 3))
    end = data.draw(st.integers(start, offsets[-1] + 4))
    limit = data.draw(st.integers(0, len(records) + 1))
    expected = [(o, *r) for o, r in zip(offsets, records, strict=True) if start <= o < end]
    got = decode_range(encode(offsets, records), start, end, limit)
    assert list(zip(*got, strict=True)) == expected[:limit]
    keyed = decode_range(encode(offsets, records), start, end, limit, fields=False)
    assert keyed[:3] == got[:3] and keyed[3:] == ([], [])


def test_a_fresh_append_stores_no_offsets_and_one_timestamp() -> None:
    dense = encode_batch(10, [b"k"] * 100, [b"v"] * 100, [5] * 100, None, range(10, 110))
    sparse = encode_batch(10, [b"k"] * 100, [b"v"] * 100, [5] * 100, None,
                          [10 + 2 * i for i in range(100)])
    assert len(sparse) - len(dense) == 8 * 100  # the dense batch stores no offsets
    assert len(dense) == 14 + 8 + 8 * 100 + 200  # head, timestamp, lengths, data
    assert decode_range(dense, 0, 1000, 1000)[0] == list(range(10, 110))


def test_a_newer_format_is_refused_naming_the_fix() -> None:
    payload = bytearray(encode_batch(0, [b"k"], [b"v"], [1]))
    struct.pack_into("<B", payload, 0, 9)
    with pytest.raises(BatchFormatError, match=r"format 9 .*upgrade sampan"):
        decode_range(bytes(payload), 0, 10, 10)


def test_batch_rows_split_at_the_record_and_byte_caps() -> None:
    count = 2 * MAX_BATCH_RECORDS + 1
    rows = batch_rows(3, 1, range(5, 5 + count), [b"k"] * count, [b"v"] * count, [7] * count)
    assert [(r[0], r[1], r[2], r[3], r[4]) for r in rows] == [
        (3, 1, 5, 4 + MAX_BATCH_RECORDS, MAX_BATCH_RECORDS),
        (3, 1, 5 + MAX_BATCH_RECORDS, 4 + 2 * MAX_BATCH_RECORDS, MAX_BATCH_RECORDS),
        (3, 1, 5 + 2 * MAX_BATCH_RECORDS, 4 + count, 1)]
    big = b"x" * (MAX_BATCH_BYTES // 2 + 1)
    rows = batch_rows(3, 1, [0, 2, 3], [None] * 3, [big, big, b"small"], [1, 2, 3])
    assert [(r[2], r[3], r[4]) for r in rows] == [(0, 0, 1), (2, 3, 2)]
    assert [decode_range(r[5], 0, 10, 10)[2] for r in rows] == [[big], [big, b"small"]]


@given(headers)
def test_headers_round_trip(h: Headers) -> None:
    assert decode_headers(encode_headers(h)) == h


@pytest.mark.parametrize("sizes", [[9] * 50, [0] * 5, [3, 1023, 1024, 0, 70_000, 3],
                                   [1023] * 3 + [1024]], ids=str)
def test_items_of_one_size_or_long_ones_decode_exactly(sizes: list[int]) -> None:
    keys = [bytes([n % 251]) * size for n, size in enumerate(sizes)]
    values = list(reversed(keys))
    payload = encode_batch(0, keys, values, [1] * len(keys))
    assert decode_range(payload, 0, len(keys), len(keys))[1:3] == (keys, values)
