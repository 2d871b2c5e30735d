"""The Kafka default partitioner: Kafka's own murmur2 vectors and agreement with aiokafka."""

from __future__ import annotations

import random

import pytest
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.partitioner import murmur2 as aiokafka_murmur2
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.partitioner import RoundRobin, murmur2, partition_for_key

# org.apache.kafka.common.utils.UtilsTest.testMurmur2 (signed Java ints)
KAFKA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]

FIXED_KEYS = [
    b"",
    b"a",
    b"ab",
    b"abc",
    b"abcd",
    b"abcde",
    b"abcdef",
    b"abcdefg",
    b"\x00",
    b"\xff\xff\xff",
    b"\x80\x00\x00\x00\x7f",
    "héllo wörld".encode(),
    "日本語のキー".encode(),
    "🙂🙃".encode(),
    b"user-1",
    b"x" * 1000,
]


def aiokafka_partition(key: bytes, count: int) -> int:
    partitions = list(range(count))
    return int(DefaultPartitioner()(key, partitions, partitions))


@pytest.mark.parametrize(("data", "expected"), KAFKA_VECTORS)
def test_murmur2_matches_kafkas_own_test_vectors(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_murmur2_of_empty_bytes_is_the_seed_mix() -> None:
    assert murmur2(b"") == 275646681


def test_murmur2_returns_signed_32_bit_ints_like_java() -> None:
    assert [murmur2(s.encode()) for s in ("1", "12", "123", "1234", "12345")] == [
        -1993445489, 126087238, -267702483, -1614185708, -1188365604]


def test_murmur2_equals_aiokafkas_unsigned_hash_modulo_2_32() -> None:
    for key in FIXED_KEYS:
        assert murmur2(key) & 0xFFFFFFFF == aiokafka_murmur2(key)


def test_partition_for_key_matches_aiokafka_for_fixed_keys_and_counts_1_to_64() -> None:
    for key in FIXED_KEYS:
        for count in range(1, 65):
            assert partition_for_key(key, count) == aiokafka_partition(key, count), (key, count)


def test_partition_for_key_matches_aiokafka_for_2000_seeded_random_keys() -> None:
    rng = random.Random(20240607)
    keys = [rng.randbytes(rng.randrange(0, 40)) for _ in range(2000)]
    for key in keys:
        for count in range(1, 65):
            assert partition_for_key(key, count) == aiokafka_partition(key, count), (key, count)


@settings(max_examples=500, deadline=None)
@given(key=st.binary(max_size=80), count=st.integers(min_value=1, max_value=64))
def test_partition_for_key_matches_aiokafka_for_any_bytes(key: bytes, count: int) -> None:
    assert partition_for_key(key, count) == aiokafka_partition(key, count)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=30), count=st.integers(min_value=1, max_value=64))
def test_partition_for_key_matches_aiokafka_for_utf8_text(text: str, count: int) -> None:
    key = text.encode()
    assert partition_for_key(key, count) == aiokafka_partition(key, count)


def test_partition_for_key_gives_the_same_answer_when_the_hash_is_memoized() -> None:
    first = [partition_for_key(b"word-7", n) for n in range(1, 17)]
    again = [partition_for_key(b"word-7", n) for n in range(1, 17)]
    assert first == again == [aiokafka_partition(b"word-7", n) for n in range(1, 17)]


def test_partition_for_key_accepts_bytearray_and_memoryview() -> None:
    expected = partition_for_key(b"user-42", 12)
    assert partition_for_key(bytearray(b"user-42"), 12) == expected
    assert partition_for_key(memoryview(b"user-42"), 12) == expected


def test_partition_for_key_refuses_a_count_below_one() -> None:
    with pytest.raises(ValueError, match="partition count must be at least 1, got 0"):
        partition_for_key(b"k", 0)


def test_round_robin_cycles_through_partitions_per_stream() -> None:
    turns = RoundRobin()
    assert [turns.next_partition("clicks", 3) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_round_robin_keeps_an_independent_turn_for_each_stream() -> None:
    turns = RoundRobin()
    assert [turns.next_partition("a", 4), turns.next_partition("b", 4),
            turns.next_partition("a", 4), turns.next_partition("b", 2)] == [0, 0, 1, 1]


def test_round_robin_starts_at_the_given_partition() -> None:
    turns = RoundRobin(start=5)
    assert [turns.next_partition("s", 4) for _ in range(3)] == [1, 2, 3]


def test_round_robin_follows_a_changed_partition_count() -> None:
    turns = RoundRobin()
    assert [turns.next_partition("s", 2) for _ in range(3)] == [0, 1, 0]
    assert [turns.next_partition("s", 4) for _ in range(2)] == [3, 0]
