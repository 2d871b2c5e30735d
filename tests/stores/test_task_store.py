"""TaskStore: the write buffer between a task and its engine, and the commit hand-off."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from framework.errors import SerdeError, StoreError
from framework.stores import ChangelogPosition, MemoryEngine, RocksDBEngine, TaskStore


class StringSerde:
    """Stand-in for framework.config.serdes' "string" serde (UTF-8)."""

    name = "string"

    def to_bytes(self, obj: Any) -> bytes:
        return obj.encode()

    def from_bytes(self, data: bytes) -> Any:
        return data.decode()


class JsonSerde:
    """Stand-in for framework.config.serdes' "json" serde."""

    name = "json"

    def to_bytes(self, obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()

    def from_bytes(self, data: bytes) -> Any:
        return json.loads(data)


POSITION = ChangelogPosition("job-counts-changelog", 0, 7)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[RocksDBEngine]:
    made = RocksDBEngine.open(tmp_path, "counts", "Partition 0")
    yield made
    made.close()


@pytest.fixture
def store(engine: RocksDBEngine) -> TaskStore:
    return TaskStore("counts", engine, StringSerde(), JsonSerde(), max_keys=3,
                     task="Partition 0")


def stored(store: TaskStore, **values: Any) -> None:
    """Put ``values`` and commit them to the engine."""
    for key, value in values.items():
        store.put(key, value)
    store.apply(store.drain(), POSITION)


def test_reads_see_buffered_writes_before_the_engine_has_them(store: TaskStore) -> None:
    store.put("alice", {"clicks": 1})
    assert store.get("alice") == {"clicks": 1}
    assert store.engine.get(b"alice") is None


def test_get_with_a_default_and_membership(store: TaskStore) -> None:
    """``get(key, default)`` and ``key in store`` see buffered writes, the engine and deletes."""
    assert (store.get("a", 0), "a" in store) == (0, False)
    store.put("a", 5)
    store.put("b", {"n": 1})
    assert (store.get("a", 0), store.get("b", {}), "a" in store, "b" in store) == (
        5, {"n": 1}, True, True)
    store.apply(store.drain(), None)
    assert (store.get("a", 0), "a" in store) == (5, True)  # from the engine now
    store.delete("a")
    assert (store.get("a", 0), "a" in store) == (0, False)


def test_the_latest_buffered_write_wins(store: TaskStore) -> None:
    store.put("alice", 1)
    store.put("alice", 2)
    assert store.get("alice") == 2
    assert store.drain() == {b"alice": b"2"}


def test_a_delete_hides_the_stored_value_until_and_after_commit(store: TaskStore) -> None:
    stored(store, alice=1, bob=2)
    store.delete("alice")
    store.put("bob", None)
    assert (store.get("alice"), store.get("bob")) == (None, None)
    assert list(store.all()) == []
    store.apply(store.drain(), POSITION)
    assert (store.engine.get(b"alice"), store.engine.get(b"bob")) == (None, None)


def test_range_prefix_and_all_merge_buffer_and_engine_in_key_order(store: TaskStore) -> None:
    stored(store, **{"a": 1, "c": 3, "e": 5, "user:1": 10, "user:3": 30})
    store.put("b", 2)           # new between stored keys
    store.put("c", 33)          # overrides a stored value
    store.delete("e")           # hides a stored value
    store.put("user:2", 20)
    store.delete("user:9")      # tombstone for a key that never existed
    assert list(store.all()) == [
        ("a", 1), ("b", 2), ("c", 33), ("user:1", 10), ("user:2", 20), ("user:3", 30)]
    assert list(store.range("b", "user:2")) == [("b", 2), ("c", 33), ("user:1", 10)]
    assert list(store.prefix("user:")) == [("user:1", 10), ("user:2", 20), ("user:3", 30)]
    assert list(store.range("c", "c")) == []
    assert list(store.range("z", "a")) == []


def test_iteration_shows_a_snapshot_while_the_task_writes(store: TaskStore) -> None:
    stored(store, a=1, b=2)
    store.put("c", 3)
    seen = []
    for key, value in store.all():
        seen.append((key, value))
        store.put(key + "-copy", value)
        store.delete("c")
    assert seen == [("a", 1), ("b", 2), ("c", 3)]
    assert store.get("c") is None


def test_the_buffer_is_full_at_max_keys_distinct_keys(store: TaskStore) -> None:
    store.put("a", 1)
    store.put("a", 2)
    store.delete("b")
    assert (store.buffered, store.is_full) == (2, False)
    store.put("c", 3)
    assert (store.buffered, store.is_full) == (3, True)
    store.drain()
    assert store.is_full is False


def test_drain_hands_over_serialized_writes_with_tombstones(store: TaskStore) -> None:
    store.put("a", {"n": 1})
    store.delete("b")
    assert store.drain() == {b"a": b'{"n":1}', b"b": None}
    assert store.drain() == {b"a": b'{"n":1}', b"b": None}  # not applied yet: handed again


def test_drained_writes_stay_readable_until_applied(store: TaskStore) -> None:
    stored(store, a=1)
    store.put("a", 2)
    items = store.drain()
    store.put("b", 3)  # processing may continue while the commit is in flight
    assert (store.get("a"), list(store.all())) == (2, [("a", 2), ("b", 3)])
    store.apply(items, POSITION._replace(offset=8))
    assert store.engine.get(b"a") == b"2"
    assert store.engine.changelog_position() == ChangelogPosition("job-counts-changelog", 0, 8)
    assert store.drain() == {b"b": b"3"}


def test_a_failed_commit_is_retried_with_every_unapplied_write(store: TaskStore) -> None:
    store.put("a", 1)
    store.put("b", 1)
    store.drain()  # this commit fails...
    store.put("b", 2)
    assert store.drain() == {b"a": b"1", b"b": b"2"}  # ...so the next one carries it all


def test_discard_drops_everything_not_applied(store: TaskStore) -> None:
    stored(store, a=1)
    store.put("a", 2)
    store.drain()
    store.put("b", 3)
    store.discard()
    assert (store.get("a"), store.get("b"), store.buffered) == (1, None, 0)
    assert list(store.all()) == [("a", 1)]


def test_a_value_that_cannot_be_serialized_names_store_task_and_key(store: TaskStore) -> None:
    with pytest.raises(SerdeError) as error:
        store.put("alice", {1, 2})
    message = str(error.value)
    assert message.startswith("store 'counts' of task 'Partition 0': cannot serialize the "
                              "value {1, 2} of key 'alice' with the json serde:")
    assert store.buffered == 0


def test_a_key_that_cannot_be_serialized_raises_serde_error(store: TaskStore) -> None:
    with pytest.raises(SerdeError, match="cannot serialize the key 42 with the string serde"):
        store.get(42)
    with pytest.raises(SerdeError, match="keys cannot be None"):
        store.put(None, 1)


def test_a_stored_value_that_cannot_be_read_names_the_key(store: TaskStore) -> None:
    store.engine.write_batch({b"alice": b"not json"}, None)
    with pytest.raises(SerdeError, match="cannot deserialize the value of key b'alice'"):
        store.get("alice")


def test_a_serde_returning_str_is_refused() -> None:
    class TextSerde(StringSerde):
        def to_bytes(self, obj: Any) -> bytes:
            return obj  # type: ignore[no-any-return]

    store = TaskStore("counts", MemoryEngine(), TextSerde(), StringSerde())
    with pytest.raises(SerdeError, match="into str, not bytes"):
        store.put("a", "1")


def test_close_closes_the_engine(store: TaskStore) -> None:
    store.put("a", 1)
    store.close()
    with pytest.raises(StoreError, match="is closed"):
        store.get("a")


def test_a_buffer_bound_below_one_is_refused() -> None:
    with pytest.raises(StoreError, match="store 'counts': the write buffer bound must be >= 1"):
        TaskStore("counts", MemoryEngine(), StringSerde(), StringSerde(), max_keys=0)


def test_works_the_same_over_the_memory_engine() -> None:
    store = TaskStore("counts", MemoryEngine(), StringSerde(), JsonSerde(), max_keys=10)
    stored(store, a=1, c=3)
    store.put("b", 2)
    store.delete("c")
    assert list(store.all()) == [("a", 1), ("b", 2)]
    assert store.engine.changelog_position() == POSITION


def test_values_read_back_from_the_buffer_are_the_stored_ones(store: TaskStore) -> None:
    """Counters come back without a decode; a mutable value mutated after `put` does not
    change what the store holds (only immutable values are handed out again)."""
    store.put("n", 41)
    assert store.get("n") == 41
    store.put("n", store.get("n") + 1)
    assert store.get("n") == 42
    doc = {"count": 1}
    store.put("doc", doc)
    doc["count"] = 99  # not put again
    assert store.get("doc") == {"count": 1}
    store.delete("n")
    assert store.get("n") is None
    store.put("n", 5)
    assert store.drain()[b"n"] == b"5"
    assert store.get("n") == 5  # drained, not yet applied: still readable
    store.apply(store.drain(), None)
    assert (store.get("n"), store.get("doc")) == (5, {"count": 1})


def test_json_ints_are_encoded_once_at_drain_and_read_the_same_everywhere(
    engine: RocksDBEngine,
) -> None:
    from framework.config.serdes import JsonSerde as RealJson
    from framework.config.serdes import StringSerde as RealString

    store = TaskStore("totals", engine, RealString(), RealJson(), max_keys=100, task="P0")
    store.journal = []
    store.put("a", 1)
    store.put("a", 2**70)  # past 64 bits: still the JSON serde's text
    store.put("b", -3)
    store.put("c", True)  # a bool is no int here: encoded at once, as before
    store.put("d", 7)
    TaskStore.undo(store.journal)  # takes back all four puts
    assert [store.get(k) for k in "abcd"] == [None, None, None, None]
    store.put("a", 2**70)
    store.put("b", -3)
    store.put("c", True)
    assert [store.get(k) for k in "abc"] == [2**70, -3, True]
    assert list(store.all()) == [("a", 2**70), ("b", -3), ("c", True)]
    assert store.drain() == {b"a": b"1180591620717411303424", b"b": b"-3", b"c": b"true"}
    store.put("b", 4)  # written again while the drained writes are not yet applied
    assert store.get("b") == 4 and store.get("a") == 2**70
    store.apply({b"a": b"1180591620717411303424", b"b": b"-3", b"c": b"true"}, POSITION)
    assert store.drain() == {b"b": b"4"}
