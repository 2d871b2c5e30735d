"""The C check before orjson writes a JSON value (`framework._json_flat.flat`) answers as
`serdes._flat` does, for every kind of value an output may hold, and the json serde writes
the stdlib's bytes with either."""

from __future__ import annotations

import collections
import enum
import importlib
import json
import math
import sys
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework import serdes
from framework.serdes import JsonSerde

flat = importlib.import_module("framework._json_flat").flat
dumps = importlib.import_module("framework._json_flat").dumps


class Level(enum.IntEnum):
    HIGH = 2


class Name(str):
    pass


class Count(int):
    pass


LEAVES = [
    0, -1, 2**63, -(2**70), True, False, None, "", "é\x00", 0.0, -0.0, 1e-4, -1e-4,
    math.nextafter(1e-4, 0), 9.99e-5, 5e-324, sys.float_info.max, -sys.float_info.max,
    math.inf, -math.inf, math.nan, 2.5, 1e22, Level.HIGH, Name("n"), Count(3), b"b",
    (1, 2), {1, 2}, object(), collections.OrderedDict(a=1), collections.UserList([1]),
]
"""Every type `_flat` tells apart: exact ints, strs, bools and None; floats on each side
of 1e-4 and of the largest finite float; subclasses of int, str, dict and list; types
JSON cannot hold."""
LEAF_IDS = [f"{n}-{type(leaf).__name__}" for n, leaf in enumerate(LEAVES)]
"""Test ids without reprs: an `object()`'s holds its address, which differs between
pytest-xdist's workers, and they must collect the same tests."""

leaves = st.sampled_from(LEAVES) | st.floats() | st.integers() | st.text(max_size=3)
documents = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=2), inner,
                                                                max_size=4)
    | st.dictionaries(st.integers() | st.none() | st.sampled_from([Name("k"), True, 1.5]),
                      inner, max_size=3),
    max_leaves=16)


def test_the_extension_is_built_and_used_by_the_json_serde() -> None:
    """`pip install -e .` builds it; a missing build would run the Python check, slower."""
    assert serdes._is_flat is flat and serdes._dumps is dumps


@given(st.lists(documents, max_size=4) | st.dictionaries(st.text(max_size=2), documents,
                                                         max_size=4),
       st.integers(1, 5))
def test_c_answers_as_python_does(document: Any, depth: int) -> None:
    assert flat(document, depth) is serdes._flat(document, depth)


@pytest.mark.parametrize("leaf", LEAVES, ids=LEAF_IDS)
def test_each_kind_of_leaf_alike_at_each_level(leaf: Any) -> None:
    for document in ([leaf], {"k": leaf}, {"v": [leaf]}, [[{"x": leaf}]], [[[leaf]]],
                     [[[[leaf]]]]):
        for depth in (1, 2, 3, 4):
            assert flat(document, depth) is serdes._flat(document, depth), (document, depth)


def test_nesting_counts_against_the_depth() -> None:
    assert flat({"a": {"b": [1]}}, 3) and not flat({"a": {"b": [[1]]}}, 3)
    assert flat([], 1) and flat({}, 1) and not flat([[]], 1) and flat([[]], 2)


def test_keys_must_be_exact_strs() -> None:
    assert flat({"a": 1}, 3)
    for key in (1, None, True, 1.5, Name("a")):
        assert not flat({key: 1}, 3) and not serdes._flat({key: 1}, 3)


@pytest.mark.parametrize("bad", [(1,), "ab", collections.OrderedDict(), 3])
def test_a_value_that_is_not_a_dict_or_a_list_is_refused(bad: Any) -> None:
    with pytest.raises(TypeError, match="takes a dict or a list"):
        flat(bad, 3)


@pytest.mark.parametrize("depth", [0, -1, 65, 2**70])
def test_a_depth_out_of_range_is_refused(depth: int) -> None:
    with pytest.raises((ValueError, OverflowError)):
        flat([1], depth)


@given(documents)
def test_the_json_serde_writes_the_stdlib_bytes_with_either_check(document: Any) -> None:
    try:
        expected: bytes | type[Exception] = json.dumps(
            document, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    except (TypeError, ValueError):
        expected = TypeError
    for check, write in ((flat, dumps), (serdes._flat, serdes._dumps_flat)):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(serdes, "_is_flat", check)
            patch.setattr(serdes, "_dumps", write)
            try:
                written: bytes | type[Exception] = JsonSerde().to_bytes(document)
            except serdes.SerdeError:
                written = TypeError
        assert written == expected, check


@given(documents, st.integers(1, 4), st.sampled_from([0, 5, 1024]))
def test_c_dumps_answers_as_python_does(document: Any, depth: int, buffer: int) -> None:
    """The check, orjson's write and the copy of a short result in one C call: the same
    bytes (or None: not flat, or orjson refused an integer) as the Python steps."""
    if not isinstance(document, dict | list):
        document = [document]
    expected = serdes._dumps_flat(document, orjson.dumps, depth, buffer)
    written = dumps(document, orjson.dumps, depth, buffer)
    assert written == expected and type(written) is type(expected)


def test_dumps_copies_only_short_results_and_lets_other_errors_through() -> None:
    long = dumps(["x" * 2000], orjson.dumps, 3, 1024)
    short = dumps(["x"], orjson.dumps, 3, 1024)
    assert long == orjson.dumps(["x" * 2000]) and short == b'["x"]'

    def refuses(obj: Any) -> bytes:
        raise ValueError("not this one")

    with pytest.raises(ValueError, match="not this one"):
        dumps([1], refuses, 3, 1024)
    assert dumps([2**70], orjson.dumps, 3, 1024) is None  # orjson's TypeError: not for it
    assert dumps([b"b"], orjson.dumps, 3, 1024) is None  # not flat: orjson never called
