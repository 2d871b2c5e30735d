"""Serdes: exact bytes of the built-ins, custom serdes by "module:Name", errors with context."""

from __future__ import annotations

import collections
import enum
import json
import math
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework.config.serdes import Serde, decode, encode, get_serde
from framework.errors import ConfigError, SampanError, SerdeError


@pytest.fixture(autouse=True)
def isolated_imports() -> Iterator[None]:
    """Custom serde modules written by a test do not outlive it."""
    path, modules = sys.path[:], set(sys.modules)
    yield
    sys.path[:] = path
    for name in set(sys.modules) - modules:
        del sys.modules[name]


class Exploding:
    """A serde that must not be called."""

    name = "exploding"

    def to_bytes(self, obj: Any) -> bytes:
        raise AssertionError("to_bytes called")

    def from_bytes(self, data: bytes) -> Any:
        raise AssertionError("from_bytes called")


def failure(call: Callable[[], object]) -> str:
    """The message of the `SerdeError` ``call`` raises."""
    with pytest.raises(SerdeError) as caught:
        call()
    return str(caught.value)


# --- built-ins -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["bytes", "string", "json", "msgpack", "int64"])
def test_each_builtin_serde_is_named_as_in_the_job_file(name: str) -> None:
    serde = get_serde(name)
    assert serde.name == name
    assert isinstance(serde, Serde)


def test_get_serde_returns_the_same_instance_for_the_same_name() -> None:
    assert get_serde("json") is get_serde("json")


def test_bytes_serde_is_the_identity() -> None:
    serde = get_serde("bytes")
    assert serde.to_bytes(b"\x00\xff") == b"\x00\xff"
    assert serde.from_bytes(b"\x00\xff") == b"\x00\xff"


def test_bytes_serde_accepts_bytearray_and_memoryview() -> None:
    serde = get_serde("bytes")
    assert serde.to_bytes(bytearray(b"ab")) == b"ab"
    assert serde.to_bytes(memoryview(b"cd")) == b"cd"


def test_bytes_serde_refuses_text() -> None:
    assert failure(lambda: get_serde("bytes").to_bytes("text")) == (
        "expected bytes, bytearray or memoryview, got str")


def test_string_serde_is_utf8() -> None:
    serde = get_serde("string")
    assert serde.to_bytes("héllo") == b"h\xc3\xa9llo"
    assert serde.from_bytes(b"h\xc3\xa9llo") == "héllo"


def test_string_serde_refuses_non_strings_rather_than_str_them() -> None:
    assert failure(lambda: get_serde("string").to_bytes(42)) == "expected str, got int"


def test_string_serde_refuses_invalid_utf8() -> None:
    assert failure(lambda: get_serde("string").from_bytes(b"\xff")) == (
        "not UTF-8: 'utf-8' codec can't decode byte 0xff in position 0: invalid start byte")


def test_json_serde_is_compact_keeps_key_order_and_non_ascii() -> None:
    assert get_serde("json").to_bytes({"b": 1, "a": [1, "é", None, True]}) == (
        '{"b":1,"a":[1,"é",null,true]}'.encode())


def test_json_serde_round_trips_a_document() -> None:
    serde = get_serde("json")
    value = {"word": "naïve", "count": 3, "ratio": 0.5, "tags": ["x"]}
    assert serde.from_bytes(serde.to_bytes(value)) == value


def test_json_serde_refuses_nan() -> None:
    # the wording after the prefix is the json module's and varies across Pythons
    assert failure(lambda: get_serde("json").to_bytes(float("nan"))).startswith(
        "not JSON-serializable: Out of range float values are not JSON compliant")


def test_json_serde_refuses_objects_json_cannot_hold() -> None:
    assert failure(lambda: get_serde("json").to_bytes({1, 2})) == (
        "not JSON-serializable: Object of type set is not JSON serializable")


def test_json_serde_refuses_malformed_bytes() -> None:
    assert failure(lambda: get_serde("json").from_bytes(b"nope")) == (
        "not JSON: Expecting value: line 1 column 1 (char 0)")


@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12))
def test_json_serde_decodes_exactly_what_the_stdlib_decodes(document: Any) -> None:
    # The fast decoder must never change a value: big integers stay exact ints.
    for text in (json.dumps(document), json.dumps(document, indent=1, ensure_ascii=False)):
        data = text.encode()
        assert repr(get_serde("json").from_bytes(data)) == repr(json.loads(data))


@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4)
    | st.dictionaries(st.integers(), inner, max_size=3),
    max_leaves=12))
def test_json_serde_encodes_exactly_what_the_stdlib_encodes(document: Any) -> None:
    stdlib = json.dumps(document, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    try:
        expected = stdlib.encode()
    except UnicodeEncodeError:  # a lone surrogate: refused either way
        with pytest.raises(SerdeError):
            get_serde("json").to_bytes(document)
        return
    assert get_serde("json").to_bytes(document) == expected


@pytest.mark.parametrize("document", [
    {"start": 60_000, "value": 3, "final": True, "note": None},
    {"n": 2**64 - 1, "m": -(2**63)}, {"n": 2**64}, [2**70, -(2**70)],
    {"s": "\x00\x1f\x7f\"\\/\n\t\u2028é😀"}, ["\x08\x0c\r"], {}, [],
    {"start": 0, "value": {"views": 3, "avg": 2.5, "top": [1e22, -0.0, 0.0001, 1e-05]}},
    [[[[1.5, 9.99e-05, 5e-324, 1.7976931348623157e308]]]], {"v": {"n": 2**64}},
])
def test_json_serde_encodes_flat_documents_as_the_stdlib_does(document: Any) -> None:
    assert get_serde("json").to_bytes(document) == json.dumps(
        document, separators=(",", ":"), ensure_ascii=False).encode()


class Level(enum.IntEnum):
    HIGH = 2


class Colour(enum.Enum):
    RED = "red"


class Name(str):
    pass


class Count(int):
    pass


class Ratio(float):
    pass


LEAVES = [
    0, -1, 2**63, -(2**70), True, False, None, "", "é\x00", 0.0, -0.0, 1e-4, -1e-4,
    math.nextafter(1e-4, 0), 9.99e-5, 5e-324, sys.float_info.max, -sys.float_info.max,
    math.inf, -math.inf, math.nan, 2.5, 1e22, Level.HIGH, Colour.RED, Name("n"), Count(3),
    Ratio(0.5), b"b", (1, 2), {1, 2}, object(), uuid.UUID(int=7),
    collections.OrderedDict(a=1), collections.UserList([1]),
]
"""Every kind of value the JSON serde tells apart before it lets orjson write a dict or a
list: exact ints, strs, bools and None; floats on each side of 1e-4 and of the largest
finite float; subclasses of int, str, float, dict and list; enums; types JSON cannot hold
and types orjson writes where the stdlib refuses them (a UUID, an enum)."""
LEAF_IDS = [f"{n}-{type(leaf).__name__}" for n, leaf in enumerate(LEAVES)]
"""Test ids without reprs: an `object()`'s holds its address, which differs between
pytest-xdist's workers, and they must collect the same tests."""


@pytest.mark.parametrize("leaf", LEAVES, ids=LEAF_IDS)
def test_json_serde_writes_each_kind_of_value_as_the_stdlib_does_at_each_level(
        leaf: Any) -> None:
    """The bytes the stdlib writes, or a `SerdeError` where it refuses the value, with
    the value in a dict or list at each depth the serde checks and one past it."""
    for document in ([leaf], {"k": leaf}, {"v": [leaf]}, [[{"x": leaf}]], [[[leaf]]],
                     [[[[leaf]]]], {1: leaf}, {Name("k"): [leaf]}):
        try:
            expected: bytes | None = json.dumps(
                document, separators=(",", ":"), ensure_ascii=False,
                allow_nan=False).encode()
        except (TypeError, ValueError):
            expected = None
        if expected is None:
            with pytest.raises(SerdeError):
                get_serde("json").to_bytes(document)
        else:
            assert get_serde("json").to_bytes(document) == expected, document


@pytest.mark.parametrize("document", [{"s": "\ud800"}, ["\udfff"]])
def test_json_serde_refuses_lone_surrogates_in_flat_documents(document: Any) -> None:
    assert failure(lambda: get_serde("json").to_bytes(document)).startswith(
        "not JSON-serializable: 'utf-8' codec can't encode character")


@pytest.mark.parametrize("document", [[float("inf")], {"x": {1, 2}}, {"x": object()}])
def test_json_serde_refuses_containers_json_cannot_hold_as_the_stdlib_does(
        document: Any) -> None:
    with pytest.raises((TypeError, ValueError)) as stdlib:
        json.dumps(document, allow_nan=False)
    assert failure(lambda: get_serde("json").to_bytes(document)) == (
        f"not JSON-serializable: {stdlib.value}")


def test_json_serde_refuses_a_cycle() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    assert failure(lambda: get_serde("json").to_bytes(cycle)) == (
        "not JSON-serializable: Circular reference detected")


@pytest.mark.parametrize("data", [
    b"123456789012345678901234567890", b'{"n": [18446744073709551616, -99999999999999999999]}',
    b"NaN", b'[Infinity, -Infinity]', b'"\\ud800"', b"1e400",
])
def test_json_serde_reads_what_only_the_stdlib_decoder_accepts(data: bytes) -> None:
    assert repr(get_serde("json").from_bytes(data)) == repr(json.loads(data))


def test_msgpack_serde_writes_msgpack_bytes() -> None:
    assert get_serde("msgpack").to_bytes({"a": 1}) == b"\x81\xa1a\x01"


def test_msgpack_serde_round_trips_bytes_and_integer_map_keys() -> None:
    serde = get_serde("msgpack")
    value = {1: b"\x00raw", "k": [1, "two", None]}
    assert serde.from_bytes(serde.to_bytes(value)) == value


def test_msgpack_serde_refuses_truncated_bytes() -> None:
    assert failure(lambda: get_serde("msgpack").from_bytes(b"\x81\xa1")) == (
        "not msgpack: ValueError: Unpack failed: incomplete input")


def test_int64_serde_is_eight_bytes_big_endian_signed() -> None:
    serde = get_serde("int64")
    assert serde.to_bytes(258) == b"\x00\x00\x00\x00\x00\x00\x01\x02"
    assert serde.to_bytes(-1) == b"\xff" * 8
    assert serde.from_bytes(b"\xff" * 8) == -1


@given(a=st.integers(0, 2**63 - 1), b=st.integers(0, 2**63 - 1))
def test_int64_byte_order_matches_numeric_order_for_non_negative_ints(a: int, b: int) -> None:
    serde = get_serde("int64")
    assert (serde.to_bytes(a) < serde.to_bytes(b)) == (a < b)


def test_int64_negative_ints_sort_after_positive_ones_in_byte_order() -> None:
    serde = get_serde("int64")
    assert serde.to_bytes(-1) > serde.to_bytes(1)


def test_int64_serde_refuses_booleans() -> None:
    assert failure(lambda: get_serde("int64").to_bytes(True)) == "expected int, got bool"


def test_int64_serde_refuses_ints_outside_64_bits() -> None:
    assert failure(lambda: get_serde("int64").to_bytes(2**63)) == (
        "9223372036854775808 is outside the int64 range -2**63 .. 2**63-1")


def test_int64_serde_refuses_a_wrong_length() -> None:
    assert failure(lambda: get_serde("int64").from_bytes(b"abc")) == "expected 8 bytes, got 3"


def test_serde_errors_are_sampan_errors() -> None:
    assert issubclass(SerdeError, SampanError)


# --- get_serde -------------------------------------------------------------------------


def test_unknown_serde_name_suggests_the_closest_builtin() -> None:
    with pytest.raises(ConfigError) as caught:
        get_serde("jsn")
    assert str(caught.value) == (
        'unknown serde "jsn"; did you mean "json"? Built-in serdes: bytes, string, json, '
        'msgpack, int64; a custom serde is named "module:Class"')


def write_module(folder: Path, name: str, source: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(source)
    return folder


UPPER = """
class Upper:
    name = "upper"
    def to_bytes(self, obj): return obj.upper().encode()
    def from_bytes(self, data): return data.decode().lower()

def make_upper():
    return Upper()

class Nameless:
    def to_bytes(self, obj): return obj.encode()
    def from_bytes(self, data): return data.decode()

INSTANCE = Upper()

class NotASerde:
    pass
"""


def test_custom_serde_class_is_imported_from_the_search_path(tmp_path: Path) -> None:
    folder = write_module(tmp_path, "serdes_upper_a", UPPER)
    serde = get_serde("serdes_upper_a:Upper", search_path=folder)
    assert (serde.name, serde.to_bytes("abc"), serde.from_bytes(b"ABC")) == ("upper", b"ABC", "abc")


def test_custom_serde_factory_function_is_called(tmp_path: Path) -> None:
    folder = write_module(tmp_path, "serdes_upper_b", UPPER)
    assert get_serde("serdes_upper_b:make_upper", search_path=folder).to_bytes("x") == b"X"


def test_custom_serde_object_is_used_as_is(tmp_path: Path) -> None:
    folder = write_module(tmp_path, "serdes_upper_c", UPPER)
    assert get_serde("serdes_upper_c:INSTANCE", search_path=folder).to_bytes("y") == b"Y"


def test_custom_serde_without_a_name_is_named_by_its_spec(tmp_path: Path) -> None:
    folder = write_module(tmp_path, "serdes_upper_d", UPPER)
    assert get_serde("serdes_upper_d:Nameless", search_path=folder).name == (
        "serdes_upper_d:Nameless")


def test_custom_serde_from_a_missing_module_names_the_spec_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        get_serde("no_such_serdes:Thing", search_path=tmp_path)
    assert str(caught.value) == (
        f'serde "no_such_serdes:Thing": no module named "no_such_serdes" (searched {tmp_path} '
        "and sys.path); put no_such_serdes.py next to the job file or install the package "
        "that provides it")


def test_custom_serde_with_a_missing_attribute_suggests_a_close_one(tmp_path: Path) -> None:
    folder = write_module(tmp_path, "serdes_upper_e", UPPER)
    with pytest.raises(ConfigError) as caught:
        get_serde("serdes_upper_e:Uper", search_path=folder)
    assert str(caught.value) == (
        f'serde "serdes_upper_e:Uper": module "serdes_upper_e" ({folder}/serdes_upper_e.py) '
        'has no attribute "Uper"; did you mean "serdes_upper_e:Upper"?')


def test_custom_serde_that_is_not_a_serde_is_refused(tmp_path: Path) -> None:
    folder = write_module(tmp_path, "serdes_upper_f", UPPER)
    with pytest.raises(ConfigError) as caught:
        get_serde("serdes_upper_f:NotASerde", search_path=folder)
    assert str(caught.value) == (
        'serde "serdes_upper_f:NotASerde" is not a serde (NotASerde); it needs '
        "to_bytes(obj) -> bytes and from_bytes(data) -> object methods")


# --- decode / encode with context ------------------------------------------------------


def test_decode_passes_none_through_without_calling_the_serde() -> None:
    assert decode(Exploding(), None, part="key", stream="local.events", partition=0,
                  offset=1) is None


def test_encode_passes_none_through_without_calling_the_serde() -> None:
    assert encode(Exploding(), None, part="value", stream="local.totals") is None


def test_decode_returns_the_object() -> None:
    assert decode(get_serde("json"), b"[1,2]", part="value", stream="local.events",
                  partition=3, offset=17) == [1, 2]


def test_decode_failure_names_part_stream_partition_offset_and_serde() -> None:
    with pytest.raises(SerdeError) as caught:
        decode(get_serde("json"), b"{", part="value", stream="local.events", partition=3,
               offset=17)
    assert str(caught.value) == (
        "cannot decode value of local.events[3] offset 17 with serde 'json': not JSON: "
        "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)")


def test_decode_failure_of_a_foreign_exception_names_its_type() -> None:
    with pytest.raises(SerdeError) as caught:
        decode(Exploding(), b"x", part="key", stream="kafka.clicks", partition=0, offset=5)
    assert str(caught.value) == (
        "cannot decode key of kafka.clicks[0] offset 5 with serde 'exploding': "
        "AssertionError: from_bytes called")


def test_encode_failure_names_part_stream_and_serde() -> None:
    with pytest.raises(SerdeError) as caught:
        encode(get_serde("string"), 7, part="key", stream="local.totals")
    assert str(caught.value) == (
        "cannot encode key for local.totals with serde 'string': expected str, got int")


def test_encode_failure_names_the_partition_when_known() -> None:
    with pytest.raises(SerdeError) as caught:
        encode(get_serde("int64"), "7", part="key", stream="local.c", partition=2)
    assert str(caught.value) == (
        "cannot encode key for local.c[2] with serde 'int64': expected int, got str")


def test_encode_refuses_a_serde_that_returns_text() -> None:
    class Sloppy:
        name = "sloppy"

        def to_bytes(self, obj: Any) -> Any:
            return str(obj)

        def from_bytes(self, data: bytes) -> Any:
            return data

    with pytest.raises(SerdeError) as caught:
        encode(Sloppy(), 1, part="value", stream="local.out")
    assert str(caught.value) == (
        "cannot encode value for local.out: serde 'sloppy' returned str, not bytes")


def test_encode_turns_a_bytearray_result_into_bytes() -> None:
    class Growing:
        name = "growing"

        def to_bytes(self, obj: Any) -> Any:
            return bytearray(obj, "ascii")

        def from_bytes(self, data: bytes) -> Any:
            return data

    assert encode(Growing(), "ab", part="value", stream="local.out") == b"ab"


@pytest.mark.parametrize("value", [0, 7, 10, -3, 123456789012345678, 10**18, -(10**18), 10**30])
def test_json_int_fast_path_matches_the_json_module(value: int) -> None:
    """Counters take a fast path both ways; the bytes must equal json's and round-trip."""
    serde = get_serde("json")
    assert serde.to_bytes(value) == json.dumps(value).encode()
    assert serde.from_bytes(serde.to_bytes(value)) == value


@pytest.mark.parametrize("text", [b"007", b"0", b"1_000", b"+5"])
def test_json_decode_fast_path_keeps_json_rules(text: bytes) -> None:
    """Only canonical natural numbers skip the decoder: "007", "1_000", "+5" are not JSON."""
    serde = get_serde("json")
    if text == b"0":
        assert serde.from_bytes(text) == 0
    else:
        with pytest.raises(SerdeError, match="not JSON"):
            serde.from_bytes(text)
