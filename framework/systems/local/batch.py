"""The payload of one record batch of the local log: columns packed with `struct`.

A commit's records for one partition are stored as one SQLite row whose ``payload`` holds
every record's offset, key, value, timestamp and headers. All integers are little-endian
and fixed-width, so a log file reads the same on any machine and Python version; nothing
is pickled (a log file is data, never code). Encoding and decoding run in C (`struct`,
`bytes.join`, slicing of tuples): no Python-level loop per record unless a batch holds a
None key or value, or headers.

Layout: a 14-byte head ``<BBIq`` (format version, flags, record count ``n``, base offset),
then

- ``SPARSE``: ``n`` i64 offsets (else the offsets are ``base .. base + n - 1``: a fresh
  append; compaction leaves gaps and writes them out),
- ``TIMESTAMPS``: ``n`` i64 timestamps (else one i64 shared by every record),
- ``n`` i32 key lengths, then ``n`` i32 value lengths (-1: None, only with ``NULLS``),
- ``HEADERS``: ``n`` i32 lengths of each record's encoded headers (0: none),
- the keys, the values, then the encoded headers, each concatenated.

>>> payload = encode_batch(7, [b"a", None], [b"1", b"22"], [5, 5])
>>> decode_range(payload, 0, 100, 10)
([7, 8], [b'a', None], [b'1', b'22'], [5, 5], [(), ()])
>>> decode_range(payload, 8, 100, 10)[:3]
([8], [None], [b'22'])
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from collections.abc import Sequence

from framework.errors import SystemUnavailableError
from framework.systems.base import Headers

__all__ = [
    "FORMAT_VERSION", "MAX_BATCH_BYTES", "MAX_BATCH_RECORDS", "TIMES_PREFIX", "BatchColumns",
    "BatchRow", "batch_rows", "decode_headers", "decode_keys", "decode_range", "encode_batch",
    "encode_headers", "first_offset_at", "newest_timestamp",
]

FORMAT_VERSION = 1
MAX_BATCH_RECORDS = 1000
"""Records per batch at most: a fetch decodes only the records it returns, but it still
unpacks the whole batch's lengths, and compaction rewrites whole batches."""
MAX_BATCH_BYTES = 1 << 20
"""Key, value and header bytes per batch at most (a single larger record is one batch)."""
SPARSE, TIMESTAMPS, HEADERS, NULLS = 1, 2, 4, 8
_HEAD = struct.Struct("<BBIq")
_I64 = struct.Struct("<q")
_CODES = [f"{size}s" for size in range(1024)]
"""`struct` codes of items up to 1023 bytes (what `_format` joins)."""
_NAME = struct.Struct(">H")
_VALUE = struct.Struct(">I")

BatchRow = tuple[int, int, int, int, int, bytes]
"""A ``batches`` row: (stream_id, partition, base_offset, last_offset, count, payload)."""
BatchColumns = tuple[list[int], list[bytes | None], list[bytes | None], list[int], list[Headers]]
"""(offsets, keys, values, timestamps, headers) of the records decoded from a batch."""


class BatchFormatError(SystemUnavailableError):
    """A batch payload this sampan cannot read (a newer format, or damaged bytes)."""


def encode_headers(headers: Headers) -> bytes | None:
    """Headers as ``(u16 name length, name, u32 value length, value)*``; None when empty."""
    if not headers:
        return None
    parts: list[bytes] = []
    for name, value in headers:
        raw = name.encode()
        parts += (_NAME.pack(len(raw)), raw, _VALUE.pack(len(value)), bytes(value))
    return b"".join(parts)


def decode_headers(blob: bytes | None) -> Headers:
    """Inverse of `encode_headers`."""
    if not blob:
        return ()
    result: list[tuple[str, bytes]] = []
    at = 0
    while at < len(blob):
        (size,) = _NAME.unpack_from(blob, at)
        name = blob[at + 2 : at + 2 + size].decode()
        at += 2 + size
        (size,) = _VALUE.unpack_from(blob, at)
        result.append((name, blob[at + 4 : at + 4 + size]))
        at += 4 + size
    return tuple(result)


def _column(items: Sequence[bytes | None]) -> tuple[list[int], bytes, bool]:
    """Lengths (-1 for None), the non-None items concatenated, and whether any is None:
    one C pass each unless there is a None."""
    try:
        return list(map(len, items)), b"".join(items), False  # type: ignore[arg-type]
    except TypeError:  # a None (a tombstone, a record without key)
        return ([-1 if item is None else len(item) for item in items],
                b"".join([item for item in items if item is not None]), True)


def encode_batch(
    base: int,
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    timestamps: Sequence[int],
    headers: Sequence[bytes | None] | None = None,
    offsets: Sequence[int] | None = None,
) -> bytes:
    """One batch's payload. ``headers`` are already encoded (`encode_headers`) or None;
    ``offsets`` None means dense from ``base`` (else ascending, the first being ``base``)."""
    n = len(keys)
    flags = 0
    parts: list[bytes] = [b""]
    if offsets is not None and (offsets[-1] - offsets[0] != n - 1):
        flags |= SPARSE
        parts.append(struct.pack(f"<{n}q", *offsets))
    if timestamps.count(timestamps[0]) == n:
        parts.append(_I64.pack(timestamps[0]))
    else:
        flags |= TIMESTAMPS
        parts.append(struct.pack(f"<{n}q", *timestamps))
    key_lengths, key_data, key_nulls = _column(keys)
    value_lengths, value_data, value_nulls = _column(values)
    if key_nulls or value_nulls:
        flags |= NULLS
    parts.append(struct.pack(f"<{2 * n}i", *key_lengths, *value_lengths))
    header_data = b""
    if headers is not None and any(headers):
        flags |= HEADERS
        parts.append(struct.pack(f"<{n}i", *[len(h) if h else 0 for h in headers]))
        header_data = b"".join([h for h in headers if h])
    parts[0] = _HEAD.pack(FORMAT_VERSION, flags, n, base)
    parts += (key_data, value_data, header_data)
    return b"".join(parts)


def _head(payload: bytes) -> tuple[int, int, int]:
    version, flags, n, base = _HEAD.unpack_from(payload)
    if version != FORMAT_VERSION:
        raise BatchFormatError(
            f"record batch format {version} is not readable by this sampan (it reads "
            f"format {FORMAT_VERSION}); upgrade sampan, or the log file is damaged")
    return flags, n, base


def newest_timestamp(payload: bytes) -> int:
    """The largest record timestamp of a batch (what time-based retention compares),
    read from its head and timestamps only.

    >>> newest_timestamp(encode_batch(0, [b"a", b"b"], [b"1", b"2"], [9, 4]))
    9
    """
    flags, n, _ = _head(payload)
    at = _HEAD.size + (8 * n if flags & SPARSE else 0)
    if not flags & TIMESTAMPS:
        return int(_I64.unpack_from(payload, at)[0])
    return int(max(struct.unpack_from(f"<{n}q", payload, at)))


TIMES_PREFIX = _HEAD.size + 16 * MAX_BATCH_RECORDS
"""Bytes of a payload's start that hold its head, offsets and timestamps (what
`first_offset_at` reads): a reader by time needs no more of a batch."""


def first_offset_at(payload: bytes, timestamp_ms: int) -> int | None:
    """The offset of the batch's first record stamped at or after ``timestamp_ms``; None
    when every record is older. Reads the head, offsets and timestamps only (the first
    `TIMES_PREFIX` bytes of the payload are enough).

    >>> payload = encode_batch(7, [b"a", b"b", b"c"], [b"1", b"2", b"3"], [5, 9, 6])
    >>> first_offset_at(payload, 6), first_offset_at(payload, 9), first_offset_at(payload, 10)
    (8, 8, None)
    """
    flags, n, base = _head(payload)
    at = _HEAD.size
    offsets: Sequence[int] = range(base, base + n)
    if flags & SPARSE:
        offsets = struct.unpack_from(f"<{n}q", payload, at)
        at += 8 * n
    if not flags & TIMESTAMPS:
        return base if _I64.unpack_from(payload, at)[0] >= timestamp_ms else None
    stamps = struct.unpack_from(f"<{n}q", payload, at)
    return next((o for o, t in zip(offsets, stamps, strict=True) if t >= timestamp_ms), None)


def _format(lengths: Sequence[int]) -> str:
    """The `struct` format of items of these (non-negative) ``lengths``: a run of one
    size repeats one code (and `struct` keeps it compiled), short items take theirs
    from `_CODES`; only longer ones are formatted one by one."""
    if lengths and lengths.count(lengths[0]) == len(lengths):
        return f"{lengths[0]}s" * len(lengths)
    try:
        return "".join(map(_CODES.__getitem__, lengths))
    except IndexError:  # an item of `len(_CODES)` bytes or more
        return "%ds" * len(lengths) % tuple(lengths)


def _columns(lengths: Sequence[int], payload: bytes, at: int, null: bool
             ) -> list[bytes | None]:
    """The items of one column whose ``lengths`` start at byte ``at`` of ``payload``."""
    if not null:
        return list(struct.unpack_from(_format(lengths), payload, at))
    items: list[bytes | None] = list(struct.unpack_from(
        _format([0 if size < 0 else size for size in lengths]), payload, at))
    for index, size in enumerate(lengths):
        if size < 0:
            items[index] = None
    return items


def _size(lengths: Sequence[int], null: bool) -> int:
    """Bytes taken by items of these ``lengths`` (-1, None, takes none)."""
    return sum(lengths) + lengths.count(-1) if null else sum(lengths)


def decode_range(payload: bytes, start: int, end: int, limit: int,
                 fields: bool = True) -> BatchColumns:
    """The records of ``payload`` with ``start <= offset < end``, at most ``limit`` of them.

    Only those records' bytes are copied out. ``fields=False`` skips timestamps and
    headers (empty lists), for readers that need offsets, keys and values only.
    """
    flags, n, base = _head(payload)
    at = _HEAD.size
    offsets: Sequence[int]
    if flags & SPARSE:
        offsets = struct.unpack_from(f"<{n}q", payload, at)
        at += 8 * n
        first, stop = bisect_left(offsets, start), bisect_left(offsets, end)
    else:
        offsets = range(base, base + n)
        first, stop = min(max(0, start - base), n), min(max(0, end - base), n)
    stop = min(stop, first + max(0, limit))
    if first >= stop:
        return [], [], [], [], []
    count = stop - first
    if flags & TIMESTAMPS:
        timestamps = list(struct.unpack_from(f"<{count}q", payload, at + 8 * first)) \
            if fields else []
        at += 8 * n
    else:
        timestamps = [_I64.unpack_from(payload, at)[0]] * count if fields else []
        at += 8
    lengths = struct.unpack_from(f"<{2 * n}i", payload, at)
    at += 8 * n
    key_lengths, value_lengths = lengths[:n], lengths[n:]
    null = bool(flags & NULLS)
    header_lengths: tuple[int, ...] = ()
    if flags & HEADERS:
        header_lengths = struct.unpack_from(f"<{n}i", payload, at)
        at += 4 * n
    keys_size = _size(key_lengths, null)
    values_at = at + keys_size
    keys = _columns(key_lengths[first:stop], payload, at + _size(key_lengths[:first], null), null)
    values = _columns(value_lengths[first:stop], payload,
                      values_at + _size(value_lengths[:first], null), null)
    headers: list[Headers]
    if not fields:
        headers = []
    elif header_lengths:
        headers_at = values_at + _size(value_lengths, null) + sum(header_lengths[:first])
        blobs = struct.unpack_from("%ds" * count % header_lengths[first:stop], payload,
                                   headers_at)
        headers = [decode_headers(blob) if blob else () for blob in blobs]
    else:
        headers = [()] * count
    return list(offsets[first:stop]), keys, values, timestamps, headers


def decode_keys(payload: bytes) -> tuple[Sequence[int], list[bytes | None]]:
    """Every offset and key of a batch (compaction's view)."""
    offsets, keys, _, _, _ = decode_range(payload, -1 << 62, 1 << 62, 1 << 62, fields=False)
    return offsets, keys


def _bounds(keys: Sequence[bytes | None], values: Sequence[bytes | None],
            headers: Sequence[bytes | None] | None) -> list[tuple[int, int]]:
    """Index ranges splitting records into batches within both caps."""
    n = len(keys)
    try:
        size = sum(map(len, keys)) + sum(map(len, values))  # type: ignore[arg-type]
    except TypeError:  # a None
        size = sum(map(len, filter(None, keys))) + sum(map(len, filter(None, values)))
    if headers:
        size += sum(map(len, filter(None, headers)))
    if size <= MAX_BATCH_BYTES:
        return [(lo, min(n, lo + MAX_BATCH_RECORDS)) for lo in range(0, n, MAX_BATCH_RECORDS)]
    bounds, lo, taken = [], 0, 0
    for index in range(n):
        one = len(keys[index] or b"") + len(values[index] or b"") + (
            len(headers[index] or b"") if headers else 0)
        if index > lo and (taken + one > MAX_BATCH_BYTES or index - lo == MAX_BATCH_RECORDS):
            bounds.append((lo, index))
            lo, taken = index, 0
        taken += one
    bounds.append((lo, n))
    return bounds


def batch_rows(
    stream_id: int, partition: int, offsets: Sequence[int],
    keys: Sequence[bytes | None], values: Sequence[bytes | None], timestamps: Sequence[int],
    headers: Sequence[bytes | None] | None = None,
) -> list[BatchRow]:
    """The ``batches`` rows holding these records of one partition (ascending
    ``offsets``; a `range` for a fresh append), split to `MAX_BATCH_RECORDS` and
    `MAX_BATCH_BYTES`."""
    rows: list[BatchRow] = []
    for lo, hi in _bounds(keys, values, headers):
        part = offsets[lo:hi]
        rows.append((stream_id, partition, part[0], part[-1], hi - lo, encode_batch(
            part[0], keys[lo:hi], values[lo:hi], timestamps[lo:hi],
            headers[lo:hi] if headers else None, part)))
    return rows
