"""Record columns → one Arrow record batch of the DataSource's schema, decoded column-wise.

Keys and values are decoded per column, not per record: the ``string`` and ``bytes``
serdes are one UTF-8 validation inside Arrow; any other serde decodes each *distinct*
value of the batch once (`pyarrow.compute.dictionary_encode`) and takes the rendered
text back by index. Every cell equals `render` of the serde's decode of its bytes, as
a per-record decode would give it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from framework.config.serdes import BytesSerde, JsonSerde, Serde, StringSerde, decode
from framework.errors import SerdeError
from framework.spark.schema import DECODED_SCHEMA, RAW_SCHEMA
from framework.systems.base import Headers

__all__ = [
    "DECODED_SCHEMA",
    "RAW_SCHEMA",
    "ColumnDecoder",
    "RecordColumns",
    "arrow_schema",
    "headers_array",
    "record_batch",
    "render",
]

RecordColumns = tuple[
    Sequence[int], Sequence[bytes | None], Sequence[bytes | None], Sequence[int],
    Sequence[Headers]]
"""(offsets, keys, values, timestamps, headers) of one partition's records, in order."""

_HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])
_HEADERS = pa.list_(_HEADER)
_NO_HEADERS = pa.StructArray.from_arrays(
    [pa.array([], pa.string()), pa.array([], pa.binary())], fields=list(_HEADER))
# One encoder for every render: json.dumps with these arguments builds one per call.
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str)
# In JSON text, what can decode to a float (NaN and infinities included).
_FLOATISH = re.compile(rb"[0-9][.eE]|NaN|Infinity")


def arrow_schema(raw: bool) -> pa.Schema:
    """The Arrow schema matching `RAW_SCHEMA` / `DECODED_SCHEMA`."""
    payload = pa.binary() if raw else pa.string()
    return pa.schema([("key", payload), ("value", payload), ("partition", pa.int32()),
                      ("offset", pa.int64()), ("timestamp", pa.int64()), ("headers", _HEADERS)])


def render(obj: Any) -> str | None:
    """A decoded key or value as a string column: text as is, anything else as compact JSON.

    >>> render("word-1"), render({"seq": 3}), render(7), render(None)
    ('word-1', '{"seq":3}', '7', None)
    """
    if obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, bytes | bytearray | memoryview):
        return bytes(obj).decode("utf-8", "replace")
    return _COMPACT.encode(obj)


def _renderer(serde: Serde) -> Callable[[bytes], str | None]:
    """`render` of ``serde.from_bytes``; for the json serde through orjson where that gives
    the same text: without floats it does, for every string and integer orjson encodes
    (floats differ, e.g. ``1e+16`` against ``1e16``, and NaN)."""
    from_bytes = serde.from_bytes
    if not isinstance(serde, JsonSerde):
        return lambda data: render(from_bytes(data))

    def render_json(data: bytes) -> str | None:
        obj = from_bytes(data)
        if obj is None or isinstance(obj, str):
            return obj
        if _FLOATISH.search(data) is None:
            try:
                return orjson.dumps(obj).decode()
            except TypeError:  # integers past 64 bits
                pass
        return render(obj)

    return render_json


class ColumnDecoder:
    """Decodes one binary column (the keys or the values of one stream) to rendered text.

    >>> from framework.config.serdes import get_serde
    >>> values = ColumnDecoder(get_serde("json"), "value", "local.words")
    >>> cells = pa.array([b'{"seq": 1}', None, b'{"seq": 1}'], pa.binary())
    >>> values(cells, offsets=[0, 1, 2], partition=0).to_pylist()
    ['{"seq":1}', None, '{"seq":1}']
    """

    def __init__(self, serde: Serde, part: str, stream: str) -> None:
        self.serde = serde
        self.part = part
        self.stream = stream

    def __call__(self, data: pa.Array, offsets: Sequence[int], partition: int) -> pa.Array:
        """``data``'s cells decoded and rendered; ``offsets`` and ``partition`` only name
        the record in the `SerdeError` of a cell that does not decode."""
        if isinstance(self.serde, StringSerde | BytesSerde):
            try:
                return data.cast(pa.string())
            except pa.ArrowInvalid:  # not UTF-8: an error, or replacement characters
                if isinstance(self.serde, StringSerde):
                    self._fail(data, offsets, partition)
                return pa.array([render(cell) for cell in data.to_pylist()], pa.string())
        encoded = pc.dictionary_encode(data)
        render_cell = _renderer(self.serde)
        try:
            distinct = [render_cell(cell) for cell in encoded.dictionary.to_pylist()]
        except Exception:
            self._fail(data, offsets, partition)
        return pa.array(distinct, pa.string()).take(encoded.indices)

    def _fail(self, data: pa.Array, offsets: Sequence[int], partition: int) -> NoReturn:
        """Raise the `SerdeError` of the first cell that does not decode, naming its offset."""
        for cell, offset in zip(data.to_pylist(), offsets, strict=True):
            decode(self.serde, cell, part=self.part, stream=self.stream, partition=partition,
                   offset=offset)
        raise SerdeError(f"cannot decode a {self.part} of {self.stream}[{partition}] with "
                         f"serde {self.serde.name!r}")


def headers_array(headers: Sequence[Headers]) -> pa.Array:
    """The ``headers`` column: a list of (key, value) structs per record, [] for none."""
    if not any(headers):  # the common case: no record carries headers
        offsets = pa.array(np.zeros(len(headers) + 1, np.int32))
        return pa.ListArray.from_arrays(offsets, _NO_HEADERS, type=_HEADERS)
    ends, names, values = [0], [], []
    for pairs in headers:
        for name, value in pairs:
            names.append(name)
            values.append(value)
        ends.append(len(names))
    pairs_array = pa.StructArray.from_arrays(
        [pa.array(names, pa.string()), pa.array(values, pa.binary())], fields=list(_HEADER))
    return pa.ListArray.from_arrays(pa.array(ends, pa.int32()), pairs_array, type=_HEADERS)


def record_batch(
    columns: RecordColumns, partition: int, schema: pa.Schema,
    decoders: tuple[ColumnDecoder, ColumnDecoder] | None,
) -> pa.RecordBatch:
    """One batch of ``schema`` from ``columns``; ``decoders`` (key, value) or None for raw."""
    offsets, keys, values, timestamps, headers = columns
    key_array, value_array = pa.array(keys, pa.binary()), pa.array(values, pa.binary())
    if decoders is not None:
        key_array = decoders[0](key_array, offsets, partition)
        value_array = decoders[1](value_array, offsets, partition)
    return pa.RecordBatch.from_arrays([
        key_array, value_array, pa.array(np.full(len(offsets), partition, np.int32)),
        pa.array(offsets, pa.int64()), pa.array(timestamps, pa.int64()),
        headers_array(headers)], schema=schema)
