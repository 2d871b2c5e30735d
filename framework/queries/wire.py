"""Keys and values on the wire: JSON bodies, bytes as base64, keys given as text.

A key in a URL is text. Read with the store's key serde it means: ``string`` the text
itself, ``int64`` an integer, ``bytes`` base64, any other serde (``json``, ``msgpack``,
custom ones) the JSON the text parses as, else the text; ``key_format=json`` or
``base64`` says it outright. Values are decoded by the store's value serde and sent as
JSON; bytes anywhere in them become ``{"$base64": "…"}`` (`from_wire` turns them back).

>>> key_from_text("int64", "42", None), key_from_text("json", "[1, 2]", None)
(42, [1, 2])
>>> to_wire({"raw": b"\\x00\\xff", "n": 3})
b'{"raw":{"$base64":"AP8="},"n":3}'
>>> from_wire({"raw": {"$base64": "AP8="}})
{'raw': b'\\x00\\xff'}
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import orjson

from framework.queries.errors import QueryError

__all__ = ["KEY_FORMATS", "TextKey", "b64", "from_b64", "from_wire", "key_from_text",
           "to_wire"]

KEY_FORMATS = ("text", "json", "base64")
_BYTES = "$base64"


class TextKey(str):
    """A key as typed on a command line: the endpoint reads it by the store's key serde
    (`key_from_text` without a ``key_format``), so ``42`` is an integer of an int64 store."""


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def from_b64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise QueryError(f"{what} {text!r} is not base64: {error}") from None


def key_from_text(serde: str, text: str, form: str | None) -> Any:
    """The key ``text`` means for a store whose key serde is ``serde`` (see the module)."""
    if form not in (None, *KEY_FORMATS):
        raise QueryError(f"key_format {form!r} is not one of {', '.join(KEY_FORMATS)}")
    if form == "base64" or (form is None and serde == "bytes"):
        return from_b64(text, "the key")
    if form == "json":
        try:
            return json.loads(text)
        except ValueError as error:
            raise QueryError(f"the key {text!r} is not JSON ({error}); quote a string key "
                             'as "\\"text\\"" or leave key_format out') from None
    if form == "text" or serde == "string":
        return text
    if serde == "int64":
        try:
            return int(text)
        except ValueError:
            raise QueryError(f"the store's keys are integers (int64 serde); {text!r} is "
                             "not one") from None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return {_BYTES: b64(bytes(value))}
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def to_wire(document: Any) -> bytes:
    """``document`` as JSON bytes (bytes as base64 objects; dict keys of any type)."""
    return orjson.dumps(document, default=_default, option=orjson.OPT_NON_STR_KEYS)


def from_wire(value: Any) -> Any:
    """A JSON value with its ``{"$base64": …}`` objects turned back into bytes."""
    if isinstance(value, dict):
        if len(value) == 1 and _BYTES in value and isinstance(value[_BYTES], str):
            return base64.b64decode(value[_BYTES])
        return {k: from_wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_wire(v) for v in value]
    return value
