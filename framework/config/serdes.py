"""Serdes: how keys and values of streams and stores become bytes and back.

A serde is any object with ``name``, ``to_bytes(obj) -> bytes`` and
``from_bytes(data) -> object`` (`Serde`). Built-ins, by the name a job file uses:

========  ==============================================================================
bytes     identity; accepts ``bytes``, ``bytearray`` and ``memoryview``
string    UTF-8 text (``str`` only: other types are an error, not silently ``str()``-ed)
json      compact JSON (``,`` ``:``), UTF-8, non-ASCII kept as is, NaN/Infinity refused;
          keys keep insertion order (no ``sort_keys``): equal dicts built in a different
          order give different bytes, so prefer ``string`` keys over ``json`` keys;
          decoded with orjson where it gives the stdlib's result, else with the stdlib;
          dicts and lists of ints, strs, bools, None, floats of magnitude 0 or ≥ 1e-4
          and such dicts and lists (3 levels) encoded with orjson, which writes them
          byte for byte as the stdlib does
msgpack   MessagePack (``use_bin_type``; map keys may be any msgpack type)
int64     8-byte big-endian signed; byte order matches numeric order for non-negative
          ints only — negatives sort *after* positives (two's complement), so a store
          ``range`` over int64 keys must not span zero
========  ==============================================================================

Anything else is ``"module:Name"`` naming a serde class, a zero-argument factory or a
serde object (`get_serde`). Serdes raise `SerdeError`; `decode` and `encode` add where the
bytes came from or go to, and pass None (a null key, a tombstone) through untouched:

>>> decode(get_serde("json"), b'{"n":1}', part="value", stream="local.events",
...        partition=3, offset=17)
{'n': 1}
>>> try:
...     decode(get_serde("int64"), b"oops", part="key", stream="local.events",
...            partition=3, offset=17)
... except SerdeError as error:
...     print(error)
cannot decode key of local.events[3] offset 17 with serde 'int64': expected 8 bytes, got 4
"""

from __future__ import annotations

import json
import re
import struct
import sys
from collections.abc import Callable, Iterable
from difflib import get_close_matches
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import orjson

from framework.errors import ConfigError, SerdeError
from framework.importing import ImportSpecError, import_spec

__all__ = [
    "BUILTIN_SERDES",
    "BytesSerde",
    "Int64Serde",
    "JsonSerde",
    "MsgpackSerde",
    "Serde",
    "StringSerde",
    "decode",
    "encode",
    "get_serde",
]


@runtime_checkable
class Serde(Protocol):
    """Turns objects into bytes and back; ``name`` appears in error messages."""

    name: str

    def to_bytes(self, obj: Any) -> bytes:
        """The bytes of ``obj``; raises `SerdeError` when it cannot be encoded."""
        ...

    def from_bytes(self, data: bytes) -> Any:
        """The object ``data`` encodes; raises `SerdeError` when it is malformed."""
        ...


class BytesSerde:
    """Identity: values already are bytes."""

    name = "bytes"

    def to_bytes(self, obj: Any) -> bytes:
        if type(obj) is bytes:
            return obj
        if isinstance(obj, bytes | bytearray | memoryview):
            return bytes(obj)
        raise SerdeError(f"expected bytes, bytearray or memoryview, got {type(obj).__name__}")

    def from_bytes(self, data: bytes) -> bytes:
        return data if type(data) is bytes else bytes(data)


class StringSerde:
    """UTF-8 text."""

    name = "string"

    def to_bytes(self, obj: Any) -> bytes:
        if not isinstance(obj, str):
            raise SerdeError(f"expected str, got {type(obj).__name__}")
        try:
            return obj.encode()
        except UnicodeEncodeError as error:
            raise SerdeError(f"not encodable as UTF-8: {error}") from None

    def from_bytes(self, data: bytes) -> str:
        try:
            return bytes(data).decode() if type(data) is not bytes else data.decode()
        except UnicodeDecodeError as error:
            raise SerdeError(f"not UTF-8: {error}") from None


_FAST_INT = 10**18
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_FLAT = frozenset({int, str, bool, type(None)})
_encode_text: Callable[[str], str] = json.encoder.encode_basestring


def _flat(obj: dict[Any, Any] | list[Any], depth: int = 3) -> bool:
    """True for a dict with str keys, or a list, whose values are ints, strs, bools, None
    (exactly those types), floats orjson writes as the stdlib does, or such dicts and lists
    (``depth`` levels in all): orjson writes them byte for byte as the stdlib does (every
    code point, escapes included), and refuses the ints past 64 bits it cannot. A float
    qualifies when it is 0 or finite with a magnitude of at least 1e-4: orjson writes
    smaller ones without the exponent `repr` uses, and NaN and infinities as null."""
    flat, low, high = _FLAT, _SMALLEST_EXACT, _LARGEST
    values: Iterable[Any] = obj
    if type(obj) is dict:
        for key in obj:
            if type(key) is not str:
                return False
        values = obj.values()
    for value in values:
        kind = type(value)
        if kind in flat:
            continue
        if kind is float:
            if value == 0.0 or low <= (value if value > 0 else -value) <= high:
                continue
            return False
        if (kind is dict or kind is list) and depth > 1 and _flat(value, depth - 1):
            continue
        return False
    return True


_SMALLEST_EXACT = 1e-4
_ORJSON_BUFFER = 1024
"""orjson writes into a bytes object of this size and shrinks it to fit. Many such
objects kept alive (an output waits in the worker until its commit) make its later
calls slow — by their allocations, it seems: with 200,000 kept, ``orjson.dumps`` of a
two-field dict took 1.8 µs a call instead of 0.16 — unless each is copied to a bytes
object of its own size (``decode().encode()``, the same bytes) and freed: 0.5 µs."""
_LARGEST = sys.float_info.max
_LONG_DIGITS = re.compile(rb"[0-9]{19}")


class JsonSerde:
    """Compact UTF-8 JSON; see the module docstring for key order and NaN."""

    name = "json"

    _encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    _decoder = json.JSONDecoder()
    # The C encoder `_encoder.encode` builds at every call, built once, without the
    # circular-reference check (its markers dict would be shared state): the same text.
    # What it fails on (a cycle, for one) goes through `_encoder`, whose error is raised.
    _c_encoder = _c_make_encoder(None, _encoder.default, json.encoder.encode_basestring,
                                 None, ":", ",", False, False, False
                                 ) if _c_make_encoder is not None else None

    def to_bytes(self, obj: Any) -> bytes:
        kind = type(obj)
        if kind is int and -_FAST_INT < obj < _FAST_INT:  # counters and sums: the
            return str(obj).encode()                      # same text as json.dumps
        if kind is str:  # what `_encoder.encode` does with a str
            try:
                return _encode_text(obj).encode()
            except UnicodeEncodeError as error:
                raise SerdeError(f"not JSON-serializable: {error}") from None
        if kind is dict or kind is list:
            if _flat(obj, 3):
                try:
                    data = orjson.dumps(obj)
                except TypeError:  # an integer past 64 bits: the stdlib's way below
                    pass
                else:  # a short result copied to a bytes object of its size: `_ORJSON_BUFFER`
                    return data if len(data) > _ORJSON_BUFFER else data.decode().encode()
            if self._c_encoder is None:
                return self._encode(obj)
            try:
                return "".join(self._c_encoder(obj, 0)).encode()
            except Exception:
                pass
        return self._encode(obj)

    def _encode(self, obj: Any) -> bytes:
        try:
            return self._encoder.encode(obj).encode()
        except (TypeError, ValueError, UnicodeEncodeError) as error:
            raise SerdeError(f"not JSON-serializable: {error}") from None

    def from_bytes(self, data: bytes) -> Any:
        if (type(data) is bytes and len(data) < 19 and data.isdigit()
                and (len(data) == 1 or data[0] != 48)):  # a JSON natural number, no 0 prefix
            return int(data)
        # orjson decodes several times faster; what it refuses (NaN, lone surrogates) the
        # stdlib decoder below still reads, and it is never given 19-digit runs, because
        # it turns integers past 64 bits into floats where the stdlib keeps them exact.
        if len(data) < 19 or _LONG_DIGITS.search(data) is None:
            try:
                return orjson.loads(data)
            except orjson.JSONDecodeError:
                pass
        try:
            return self._decoder.decode(bytes(data).decode())
        except UnicodeDecodeError as error:
            raise SerdeError(f"not UTF-8: {error}") from None
        except ValueError as error:
            raise SerdeError(f"not JSON: {error}") from None


class MsgpackSerde:
    """MessagePack via the ``msgpack`` package (imported when the serde is first used)."""

    name = "msgpack"

    def __init__(self) -> None:
        try:
            import msgpack  # type: ignore[import-untyped]
        except ImportError:
            raise ConfigError(
                'serde "msgpack" needs the msgpack package; install it '
                "(pip install msgpack) or use the json serde"
            ) from None
        self._packb = msgpack.packb
        self._unpackb = msgpack.unpackb
        self._errors = (ValueError, TypeError, OverflowError, msgpack.UnpackException)

    def to_bytes(self, obj: Any) -> bytes:
        try:
            return self._packb(obj, use_bin_type=True)  # type: ignore[no-any-return]
        except self._errors as error:
            raise SerdeError(f"not msgpack-serializable: {error}") from None

    def from_bytes(self, data: bytes) -> Any:
        try:
            return self._unpackb(data, raw=False, strict_map_key=False)
        except self._errors as error:
            raise SerdeError(f"not msgpack: {type(error).__name__}: {error}") from None


class Int64Serde:
    """8-byte big-endian signed integers; see the module docstring for negative keys."""

    name = "int64"

    _struct = struct.Struct(">q")

    def to_bytes(self, obj: Any) -> bytes:
        if type(obj) is not int and (not isinstance(obj, int) or isinstance(obj, bool)):
            raise SerdeError(f"expected int, got {type(obj).__name__}")
        try:
            return self._struct.pack(obj)
        except struct.error:
            raise SerdeError(f"{obj} is outside the int64 range -2**63 .. 2**63-1") from None

    def from_bytes(self, data: bytes) -> int:
        if len(data) != 8:
            raise SerdeError(f"expected 8 bytes, got {len(data)}")
        value: int = self._struct.unpack(data)[0]
        return value


BUILTIN_SERDES: dict[str, type[Serde]] = {
    "bytes": BytesSerde,
    "string": StringSerde,
    "json": JsonSerde,
    "msgpack": MsgpackSerde,
    "int64": Int64Serde,
}
"""Built-in serde classes by the name a job file uses."""

_resolved: dict[tuple[str, Path | None], Serde] = {}


def get_serde(spec: str, *, search_path: Path | None = None) -> Serde:
    """The serde a job file names: a built-in name or ``"module:Name"`` (a serde class,
    a zero-argument factory or a serde object), importing ``module`` with ``search_path``
    (the job file's folder) first on ``sys.path``. Serdes are stateless: each spec
    resolves once per process and search path. Raises `ConfigError` naming the spec and the fix.

    >>> get_serde("int64").to_bytes(258)
    b'\\x00\\x00\\x00\\x00\\x00\\x00\\x01\\x02'
    """
    found = _resolved.get((spec, search_path))
    if found is None:
        found = _resolved[spec, search_path] = _resolve(spec, search_path)
    return found


def _resolve(spec: str, search_path: Path | None) -> Serde:
    builtin = BUILTIN_SERDES.get(spec)
    if builtin is not None:
        return builtin()
    if ":" not in spec:
        close = get_close_matches(spec.lower(), BUILTIN_SERDES, n=1)
        hint = f'; did you mean "{close[0]}"?' if close else ""
        raise ConfigError(
            f"unknown serde {_quote(spec)}{hint} Built-in serdes: "
            f'{", ".join(BUILTIN_SERDES)}; a custom serde is named "module:Class"'
        )
    try:
        target = import_spec(spec, search_path)
    except ImportSpecError as error:
        raise ConfigError(f"serde {_quote(spec)}: {error}") from None
    if not _is_serde(target):
        try:
            target = target() if callable(target) else target
        except Exception as error:
            raise ConfigError(
                f"serde {_quote(spec)}: calling it raised {type(error).__name__}: {error}; "
                "a serde class or factory must work without arguments"
            ) from None
    if not _is_serde(target):
        raise ConfigError(
            f"serde {_quote(spec)} is not a serde ({type(target).__name__}); it needs "
            "to_bytes(obj) -> bytes and from_bytes(data) -> object methods"
        )
    if not isinstance(getattr(target, "name", None), str):
        return _Named(spec, target)
    return target  # type: ignore[no-any-return]


def _is_serde(obj: Any) -> bool:
    return not isinstance(obj, type) and all(
        callable(getattr(obj, method, None)) for method in ("to_bytes", "from_bytes"))


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


class _Named:
    """A custom serde without a ``name``: called by its spec in messages."""

    def __init__(self, name: str, inner: Any) -> None:
        self.name = name
        self.to_bytes = inner.to_bytes
        self.from_bytes = inner.from_bytes


def _where(part: str, preposition: str, stream: str, partition: int | None) -> str:
    place = stream if partition is None else f"{stream}[{partition}]"
    return f"{part} {preposition} {place}"


def _reason(error: Exception) -> str:
    return str(error) if isinstance(error, SerdeError) else f"{type(error).__name__}: {error}"


def decode(
    serde: Serde,
    data: bytes | None,
    *,
    part: str,
    stream: str,
    partition: int | None = None,
    offset: int | None = None,
) -> Any:
    """``serde.from_bytes(data)``, None for None; a failure raises `SerdeError` naming
    ``part`` ("key"/"value"), the qualified ``stream``, partition, offset and serde."""
    if data is None:
        return None
    try:
        return serde.from_bytes(data)
    except Exception as error:
        where = _where(part, "of", stream, partition)
        if offset is not None:
            where += f" offset {offset}"
        raise SerdeError(
            f"cannot decode {where} with serde {serde.name!r}: {_reason(error)}"
        ) from error


def encode(
    serde: Serde, obj: Any, *, part: str, stream: str, partition: int | None = None
) -> bytes | None:
    """``serde.to_bytes(obj)``, None for None; a failure or a non-bytes result raises
    `SerdeError` naming ``part``, the qualified ``stream`` and the serde."""
    if obj is None:
        return None
    try:
        data = serde.to_bytes(obj)
    except Exception as error:
        raise SerdeError(
            f"cannot encode {_where(part, 'for', stream, partition)} with serde "
            f"{serde.name!r}: {_reason(error)}"
        ) from error
    if type(data) is bytes:
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise SerdeError(
        f"cannot encode {_where(part, 'for', stream, partition)}: serde {serde.name!r} "
        f"returned {type(data).__name__}, not bytes"
    )
