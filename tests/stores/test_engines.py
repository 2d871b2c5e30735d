"""The StoreEngine contract, on RocksDB (real files in tmp_path) and in memory."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from rocksdict import Options, Rdict

from framework.errors import StoreError
from framework.stores import (
    ChangelogPosition,
    MemoryEngine,
    RocksDBEngine,
    StoreEngine,
    prefix_end,
    store_path,
)

REPO = Path(__file__).resolve().parents[2]
POSITION = ChangelogPosition("job-counts-changelog", 3, 42)


@pytest.fixture(params=["rocksdb", "memory"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreEngine]:
    made: StoreEngine = (
        RocksDBEngine.open(tmp_path, "counts", "Partition 3")
        if request.param == "rocksdb" else MemoryEngine()
    )
    yield made
    made.close()


def put(engine: StoreEngine, *keys: bytes) -> None:
    engine.write_batch({key: b"v" + key for key in keys}, None)


# -- contract on both engines -------------------------------------------------------------

def test_a_missing_key_reads_none(engine: StoreEngine) -> None:
    assert engine.get(b"nope") is None


def test_written_values_read_back_and_none_deletes(engine: StoreEngine) -> None:
    engine.write_batch({b"a": b"1", b"b": b"2"}, None)
    engine.write_batch({b"a": None, b"b": b"3", b"never-written": None}, None)
    assert engine.get(b"a") is None
    assert engine.get(b"b") == b"3"
    assert list(engine.iterate()) == [(b"b", b"3")]


def test_iteration_is_sorted_by_unsigned_key_bytes(engine: StoreEngine) -> None:
    put(engine, b"\xff", b"b", b"", b"a\x00", b"a", b"\x00", b"\x7f", b"\x80")
    assert [key for key, _ in engine.iterate()] == [
        b"", b"\x00", b"a", b"a\x00", b"b", b"\x7f", b"\x80", b"\xff"]


def test_iterate_bounds_are_start_inclusive_end_exclusive(engine: StoreEngine) -> None:
    put(engine, b"a", b"b", b"c", b"d")
    assert [k for k, _ in engine.iterate(b"b", b"d")] == [b"b", b"c"]
    assert [k for k, _ in engine.iterate(b"bb", b"c\x00")] == [b"c"]
    assert [k for k, _ in engine.iterate(None, b"c")] == [b"a", b"b"]
    assert [k for k, _ in engine.iterate(b"c", None)] == [b"c", b"d"]
    assert list(engine.iterate(b"b", b"b")) == []
    assert list(engine.iterate(b"d", b"a")) == []


def test_prefix_ranges_with_0xff_bytes(engine: StoreEngine) -> None:
    put(engine, b"a", b"a\xff", b"a\xff\x00", b"a\xff\xff", b"b", b"\xff", b"\xff\xff\x01")
    assert [k for k, _ in engine.iterate(b"a\xff", prefix_end(b"a\xff"))] == [
        b"a\xff", b"a\xff\x00", b"a\xff\xff"]
    assert [k for k, _ in engine.iterate(b"\xff", prefix_end(b"\xff"))] == [
        b"\xff", b"\xff\xff\x01"]
    assert [k for k, _ in engine.iterate(b"", prefix_end(b""))] == [
        b"a", b"a\xff", b"a\xff\x00", b"a\xff\xff", b"b", b"\xff", b"\xff\xff\x01"]


def test_iteration_over_many_keys_returns_each_once_in_order(engine: StoreEngine) -> None:
    keys = [i.to_bytes(4, "big") for i in range(20_000)]
    engine.write_batch({key: key for key in reversed(keys)}, None)
    assert [key for key, _ in engine.iterate()] == keys
    assert [key for key, _ in engine.iterate(keys[100], keys[9_000])] == keys[100:9_000]
    assert engine.count() == 20_000


def test_a_fresh_engine_has_no_changelog_position(engine: StoreEngine) -> None:
    assert engine.changelog_position() is None


def test_the_position_is_written_with_the_batch_and_kept_by_batches_without_one(
    engine: StoreEngine,
) -> None:
    engine.write_batch({b"k": b"1"}, POSITION)
    assert engine.changelog_position() == POSITION
    engine.write_batch({b"k": b"2"}, None)
    assert engine.changelog_position() == POSITION
    engine.write_batch({}, POSITION._replace(offset=43))
    assert engine.changelog_position() == ChangelogPosition("job-counts-changelog", 3, 43)


def test_wipe_drops_data_and_position(engine: StoreEngine) -> None:
    engine.write_batch({b"a": b"1", b"b": b"2"}, POSITION)
    engine.wipe()
    assert (list(engine.iterate()), engine.count(), engine.changelog_position()) == ([], 0, None)
    engine.write_batch({b"c": b"3"}, POSITION)
    assert list(engine.iterate()) == [(b"c", b"3")]


# -- RocksDB: files, atomicity, locks ---------------------------------------------------

def test_each_store_and_task_gets_its_own_safe_directory(tmp_path: Path) -> None:
    engine = RocksDBEngine.open(tmp_path, "counts", "SystemStreamPartition [local, clicks, 3]")
    engine.close()
    assert store_path(tmp_path, "counts", "SystemStreamPartition [local, clicks, 3]") == (
        tmp_path / "stores" / "counts" / "SystemStreamPartition%20%5Blocal%2C%20clicks%2C%203%5D")
    assert (engine.path / "CURRENT").is_file()


def test_data_and_position_survive_close_and_reopen(tmp_path: Path) -> None:
    engine = RocksDBEngine.open(tmp_path, "counts", "Partition 3")
    engine.write_batch({b"a": b"1", b"b": b"2"}, POSITION)
    engine.write_batch({b"a": None}, POSITION._replace(offset=43))
    engine.close()
    reopened = RocksDBEngine.open(tmp_path, "counts", "Partition 3")
    assert list(reopened.iterate()) == [(b"b", b"2")]
    assert reopened.changelog_position() == ChangelogPosition("job-counts-changelog", 3, 43)
    reopened.close()


def test_data_and_position_survive_a_killed_process_together(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import os, signal
        from framework.stores import ChangelogPosition, RocksDBEngine
        engine = RocksDBEngine.open({str(tmp_path)!r}, "counts", "Partition 3")
        for offset in range(1, 4):
            engine.write_batch({{b"n": str(offset).encode(), str(offset).encode(): b"x"}},
                               ChangelogPosition("log", 0, offset))
        os.kill(os.getpid(), signal.SIGKILL)  # no close, no flush
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, check=False)
    assert done.returncode == -9
    engine = RocksDBEngine.open(tmp_path, "counts", "Partition 3")
    assert engine.changelog_position() == ChangelogPosition("log", 0, 3)
    assert list(engine.iterate()) == [(b"1", b"x"), (b"2", b"x"), (b"3", b"x"), (b"n", b"3")]
    engine.close()


def test_bulk_load_writes_read_back_after_it_and_survive_reopen(tmp_path: Path) -> None:
    engine = RocksDBEngine.open(tmp_path, "counts", "Partition 3")
    engine.write_batch({b"old": b"1"}, POSITION)
    with engine.bulk_load():
        assert engine.bulk_loading
        for offset in range(43, 53):
            engine.write_batch({str(n).encode(): str(offset).encode() for n in range(1000)},
                               POSITION._replace(offset=offset))
        engine.write_batch({b"old": None}, POSITION._replace(offset=53))
    assert not engine.bulk_loading
    assert engine.get(b"999") == b"52"
    assert engine.get(b"old") is None
    assert engine.count() == 1000
    engine.close()
    reopened = RocksDBEngine.open(tmp_path, "counts", "Partition 3")
    assert reopened.changelog_position() == POSITION._replace(offset=53)
    assert [k for k, _ in reopened.iterate(b"1", b"2")][:3] == [b"1", b"10", b"100"]
    assert reopened.count() == 1000
    reopened.close()


def test_a_failure_inside_bulk_load_leaves_a_normal_engine(tmp_path: Path) -> None:
    engine = RocksDBEngine.open(tmp_path, "counts", "Partition 3")
    with pytest.raises(RuntimeError), engine.bulk_load():
        engine.write_batch({b"a": b"1"}, POSITION)
        raise RuntimeError("restore failed")
    assert not engine.bulk_loading
    assert (engine.get(b"a"), engine.changelog_position()) == (b"1", POSITION)
    engine.close()


def test_a_process_killed_during_bulk_load_keeps_data_and_position_together(
    tmp_path: Path,
) -> None:
    script = textwrap.dedent(f"""
        import os, signal
        from framework.stores import ChangelogPosition, RocksDBEngine
        engine = RocksDBEngine.open({str(tmp_path)!r}, "counts", "Partition 3")
        with engine.bulk_load():
            for offset in range(1, 4):
                engine.write_batch({{b"n": str(offset).encode(), str(offset).encode(): b"x"}},
                                   ChangelogPosition("log", 0, offset))
            os.kill(os.getpid(), signal.SIGKILL)  # mid-restore: no flush, no reopen
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, check=False)
    assert done.returncode == -9
    engine = RocksDBEngine.open(tmp_path, "counts", "Partition 3")
    assert not engine.bulk_loading
    assert engine.changelog_position() == ChangelogPosition("log", 0, 3)
    assert list(engine.iterate()) == [(b"1", b"x"), (b"2", b"x"), (b"3", b"x"), (b"n", b"3")]
    engine.close()


def test_user_keys_never_collide_with_the_stored_position(tmp_path: Path) -> None:
    engine = RocksDBEngine.open(tmp_path, "counts", "Partition 3")
    engine.write_batch({b"changelog-position": b"user data", b"sampan": b"more"}, POSITION)
    engine.close()
    engine = RocksDBEngine.open(tmp_path, "counts", "Partition 3")
    assert engine.changelog_position() == POSITION
    assert engine.get(b"changelog-position") == b"user data"
    assert engine.count() == 2
    engine.close()
    assert sorted(Rdict.list_cf(str(engine.path), Options(raw_mode=True))) == [
        "default", "sampan"]


def test_opening_a_store_another_process_holds_names_the_path(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import sys
        from framework.stores import RocksDBEngine
        engine = RocksDBEngine.open({str(tmp_path)!r}, "counts", "Partition 3")
        print("open", flush=True)
        sys.stdin.read()
    """)
    holder = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        with pytest.raises(StoreError) as error:
            RocksDBEngine.open(tmp_path, "counts", "Partition 3")
    finally:
        holder.kill()
        holder.wait()
    message = str(error.value)
    assert str(store_path(tmp_path, "counts", "Partition 3")) in message
    assert "another worker holds this task" in message
    assert "'counts'" in message and "'Partition 3'" in message


def test_an_abandoned_iterator_does_not_keep_the_database_locked(tmp_path: Path) -> None:
    engine = RocksDBEngine.open(tmp_path, "counts", "Partition 3")
    put(engine, *(i.to_bytes(2, "big") for i in range(1_000)))
    entries = engine.iterate()
    next(entries)
    engine.close()
    reopened = RocksDBEngine.open(tmp_path, "counts", "Partition 3")
    assert reopened.count() == 1_000
    reopened.close()


def test_a_closed_engine_raises_store_error(tmp_path: Path) -> None:
    engine = RocksDBEngine.open(tmp_path, "counts", "Partition 3")
    engine.close()
    engine.close()  # idempotent
    with pytest.raises(StoreError, match=r"'counts' of task 'Partition 3' at .* is closed"):
        engine.get(b"a")


def test_wipe_survives_a_crash_after_its_rename(tmp_path: Path) -> None:
    engine = RocksDBEngine.open(tmp_path, "counts", "Partition 3")
    engine.write_batch({b"a": b"1"}, POSITION)
    engine.close()
    engine.path.rename(engine.path.with_name(engine.path.name + ".wiping"))  # the crash point
    reopened = RocksDBEngine.open(tmp_path, "counts", "Partition 3")
    assert (reopened.count(), reopened.changelog_position()) == (0, None)
    assert sorted(p.name for p in engine.path.parent.iterdir()) == ["Partition%203"]
    reopened.close()
