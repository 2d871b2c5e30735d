"""The local log: durability, several processes at once, atomic commits under SIGKILL,
fencing, expansion, compaction, fair fetching.

Run as a script, this module is the child process of the multi-process tests:
``python test_local.py produce|commit-loop ...``.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sqlite3
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from framework.errors import (
    ConfigError,
    FencedError,
    SystemUnavailableError,
    UnsupportedOperation,
)
from framework.partitioner import partition_for_key
from framework.systems import open_system
from framework.systems.base import (
    Checkpoint,
    CommitRequest,
    ProducerRecord,
    ProducerRow,
    Record,
    as_record,
)
from framework.systems.local.log import decode_headers, encode_headers
from framework.systems.local.schema import database_file
from framework.systems.local.system import LocalSystem
from groupers import SystemStreamPartition as SSP

ROOT = Path(__file__).resolve().parents[3]
COMMIT_RECORDS = 10  # records per commit of the commit-loop child


# -- child processes -----------------------------------------------------------------


async def child_produce(path: Path, stream: str, producer: int, count: int, batch: int) -> None:
    """Produce ``count`` keyed records, ``batch`` per transaction."""
    system = LocalSystem("local", path)
    for start in range(0, count, batch):
        await system.produce([
            ProducerRecord(stream, b"%d-%d" % (producer, i), b"%d:%d" % (producer, i))
            for i in range(start, min(start + batch, count))
        ])
    await system.close()


async def child_commit_loop(path: Path, job: str) -> None:
    """Commit forever: commit n writes COMMIT_RECORDS records valued n and checkpoint n."""
    system = LocalSystem("local", path)
    checkpoints = await system.read_checkpoints(job)
    n = checkpoints["t"].inputs[SSP("local", "in", 0)] if "t" in checkpoints else 0
    while True:
        n += 1
        await system.commit(CommitRequest(job, 1, [
            ProducerRecord("out", b"%d-%d" % (n, j), b"%d" % n) for j in range(COMMIT_RECORDS)
        ], [Checkpoint("t", 1, {SSP("local", "in", 0): n})]))


def spawn(*args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.Popen([sys.executable, __file__, *args], env=env, cwd=ROOT)


# -- helpers -------------------------------------------------------------------------


async def read_stream(system: LocalSystem, stream: str) -> dict[int, list[Record]]:
    counts = await system.partition_counts([stream])
    consumer = system.consumer()
    consumer.assign({SSP("local", stream, p): 0 for p in range(counts[stream])})
    result: dict[int, list[Record]] = defaultdict(list)
    while batch := await consumer.fetch(max_records=10_000, timeout_ms=0):
        for ssp, records in batch.items():
            result[ssp.partition].extend(records)
    await consumer.close()
    return dict(result)


@pytest.fixture
async def system(tmp_path: Path) -> LocalSystem:
    opened = LocalSystem("local", tmp_path)
    yield opened  # type: ignore[misc]
    await opened.close()


# -- durability and processes ----------------------------------------------------------


async def test_records_checkpoints_and_fences_survive_reopening(tmp_path: Path) -> None:
    first = LocalSystem("local", tmp_path)
    await first.create_stream("events", 2)
    await first.commit(CommitRequest("job", 1, [ProducerRecord("events", b"k", b"v", 1)],
                                     [Checkpoint("t", 1, {SSP("local", "events", 1): 1})]))
    await first.fence("job", 2)
    await first.close()

    second = LocalSystem("local", tmp_path)
    assert await second.list_streams() == {"events": 2}
    assert {p: [(r.offset, r.key) for r in rs]
            for p, rs in (await read_stream(second, "events")).items()} == {1: [(0, b"k")]}
    assert await second.read_checkpoints("job") == {
        "t": Checkpoint("t", 1, {SSP("local", "events", 1): 1})}
    with pytest.raises(FencedError):
        await second.commit(CommitRequest("job", 1))
    await second.close()


async def test_concurrent_producer_processes_write_every_record_once_with_dense_offsets(
    tmp_path: Path,
) -> None:
    setup = LocalSystem("local", tmp_path)
    await setup.create_stream("events", 8)
    await setup.close()
    producers, count = 4, 1_000

    children = [spawn("produce", str(tmp_path), "events", str(i), str(count), "50")
                for i in range(producers)]
    assert [child.wait(timeout=120) for child in children] == [0] * producers

    system = LocalSystem("local", tmp_path)
    stored = await read_stream(system, "events")
    await system.close()
    values = Counter(r.value for records in stored.values() for r in records)
    assert values == Counter(b"%d:%d" % (p, i) for p in range(producers) for i in range(count))
    for partition, records in stored.items():
        assert [r.offset for r in records] == list(range(len(records)))
        for record in records:
            assert record.key is not None
            assert partition_for_key(record.key, 8) == partition
        for p in range(producers):  # each producer's records keep their order
            mine = [int(r.value.split(b":")[1]) for r in records
                    if r.value is not None and r.value.startswith(b"%d:" % p)]
            assert mine == sorted(mine)


async def test_a_commit_killed_by_sigkill_is_all_or_nothing(tmp_path: Path) -> None:
    setup = LocalSystem("local", tmp_path)
    await setup.create_stream("out", 3)
    await setup.close()
    rng = random.Random(11)
    committed = 0
    for _ in range(5):
        child = spawn("commit-loop", str(tmp_path), "job")
        watcher = LocalSystem("local", tmp_path)
        try:
            for _ in range(3_000):  # bounded: the child is committing again
                checkpoints = await watcher.read_checkpoints("job")
                seen = checkpoints["t"].inputs[SSP("local", "in", 0)] if checkpoints else 0
                ends = await watcher.offsets("out")
                assert sum(r.end for r in ends.values()) >= seen * COMMIT_RECORDS
                if seen > committed:
                    break
                await asyncio.sleep(0.01)
            else:
                pytest.fail("the commit-loop child made no progress")
            await asyncio.sleep(rng.uniform(0, 0.05))
            child.send_signal(signal.SIGKILL)
            assert child.wait(timeout=30) == -signal.SIGKILL

            n = (await watcher.read_checkpoints("job"))["t"].inputs[SSP("local", "in", 0)]
            stored = await read_stream(watcher, "out")
        finally:
            await watcher.close()
            if child.poll() is None:
                child.kill()
                child.wait()
        values = Counter(r.value for records in stored.values() for r in records)
        assert values == {b"%d" % i: COMMIT_RECORDS for i in range(1, n + 1)}
        assert n > committed
        committed = n


# -- fencing, expansion, compaction ----------------------------------------------------


async def test_fencing_refuses_stale_epochs_and_accepts_current_ones(
    system: LocalSystem,
) -> None:
    await system.fence("job", 4)
    with pytest.raises(FencedError, match=r"job 'job': commit of epoch 3 refused.*epoch 4"):
        await system.commit(CommitRequest("job", 3, (), [Checkpoint("t", 3)]))
    await system.commit(CommitRequest("job", 4, (), [Checkpoint("t", 4)]))
    await system.commit(CommitRequest("other-job", 1, (), [Checkpoint("t", 1)]))
    assert (await system.read_checkpoints("job"))["t"].epoch == 4


async def test_expansion_keeps_records_and_new_keys_spread_over_all_partitions(
    system: LocalSystem,
) -> None:
    await system.create_stream("events", 2)
    keys = [b"user-%d" % i for i in range(100)]
    before = await system.produce([ProducerRecord("events", k, b"old") for k in keys])

    await system.expand_stream("events", 4)
    after = await system.produce([ProducerRecord("events", k, b"new") for k in keys])

    assert [p.partition for p in before] == [partition_for_key(k, 2) for k in keys]
    assert [p.partition for p in after] == [partition_for_key(k, 4) for k in keys]
    assert {p.partition for p in after} == {0, 1, 2, 3}
    # A key moves from p to p or p + 2: the same partition modulo the old count.
    assert all(a.partition % 2 == b.partition for a, b in zip(after, before, strict=True))
    stored = await read_stream(system, "events")
    assert [(r.key, r.value) for r in stored[0] if r.value == b"old"] == [
        (k, b"old") for k in keys if partition_for_key(k, 2) == 0]
    for partition, records in stored.items():
        assert [r.offset for r in records] == list(range(len(records))), partition


async def test_a_stream_cannot_shrink(system: LocalSystem) -> None:
    await system.create_stream("events", 4)
    with pytest.raises(UnsupportedOperation, match="cannot shrink stream 'events' from 4 to 3"):
        await system.expand_stream("events", 3)
    assert await system.partition_counts(["events"]) == {"events": 4}


async def test_compaction_keeps_latest_per_key_and_offsets_keep_growing(
    system: LocalSystem,
) -> None:
    await system.create_stream("changelog", 2, compacted=True)
    await system.produce([ProducerRecord("changelog", k, v, partition=p) for k, v, p in [
        (b"a", b"1", 0), (b"b", b"1", 0), (b"a", b"2", 0), (b"a", b"x", 1),
        (b"b", None, 0), (None, b"keyless", 0), (b"a", b"3", 0), (b"a", b"y", 1),
    ]])

    assert await system.compact("changelog") == 4
    assert await system.compact("changelog") == 0

    landed = await system.produce([ProducerRecord("changelog", b"c", b"1", partition=0)])
    assert landed[0].offset == 6
    stored = await read_stream(system, "changelog")
    assert {p: [(r.offset, r.key, r.value) for r in rs] for p, rs in stored.items()} == {
        0: [(3, b"b", None), (4, None, b"keyless"), (5, b"a", b"3"), (6, b"c", b"1")],
        1: [(1, b"a", b"y")],
    }


async def test_compaction_merges_small_batches_and_every_offset_reads_exactly(
    system: LocalSystem, tmp_path: Path,
) -> None:
    await system.create_stream("changelog", 1, compacted=True)
    written: list[tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes], ...]]] = []
    for commit in range(200):  # 200 writes of 1-3 records: 200 small batches
        records = [ProducerRecord("changelog", None if n == 2 else b"k%d" % ((commit + n) % 30),
                                  None if commit % 17 == 0 else b"%d-%d" % (commit, n),
                                  partition=0, headers=(("h", b"%d" % n),) if n else ())
                   for n in range(commit % 3 + 1)]
        landed = await system.produce(records)
        written += [(p.offset, r.key, r.value, r.headers) for p, r in zip(landed, records,
                                                                          strict=True)]
    latest = {key: offset for offset, key, _, _ in written}
    kept = [r for r in written if r[1] is None or latest[r[1]] == r[0]]

    assert await system.compact("changelog") == len(written) - len(kept)

    stored = (await read_stream(system, "changelog"))[0]
    assert [(r.offset, r.key, r.value, r.headers) for r in stored] == kept
    for start in range(kept[-1][0] + 2):  # from any offset, kept or dropped
        offsets, keys, values = await system.read_columns("changelog", 0, start, 1 << 40, 7)
        expected = [r for r in kept if r[0] >= start][:7]
        assert (offsets, keys, values) == tuple(
            [r[i] for r in expected] for i in range(3)), start
    conn = sqlite3.connect(tmp_path / "log.sqlite3")
    (batches,) = conn.execute("SELECT count(*) FROM batches").fetchone()
    conn.close()
    # The 200 small batches, merged run by run (21 here); a batch that lost nothing (it
    # holds only latest records) is left as it is and ends a run.
    assert batches <= 25


# -- fetching --------------------------------------------------------------------------


async def test_fetch_shares_max_records_fairly_across_partitions(system: LocalSystem) -> None:
    await system.create_stream("events", 3)
    await system.produce([ProducerRecord("events", b"k", b"v", partition=p)
                          for p in range(3) for _ in range(100)])
    consumer = system.consumer()
    consumer.assign({SSP("local", "events", p): 0 for p in range(3)})

    batch = await consumer.fetch(max_records=30)

    assert {ssp.partition: len(rs) for ssp, rs in batch.items()} == {0: 10, 1: 10, 2: 10}
    await consumer.close()


async def test_a_waiting_fetch_returns_a_record_produced_meanwhile(system: LocalSystem) -> None:
    await system.create_stream("events", 1)
    consumer = system.consumer()
    consumer.assign({SSP("local", "events", 0): 0})
    producer = LocalSystem("local", system.path)

    async def produce_soon() -> None:
        await asyncio.sleep(0.05)
        await producer.produce([ProducerRecord("events", b"k", b"late")])

    task = asyncio.create_task(produce_soon())
    batch = await consumer.fetch(timeout_ms=30_000)
    await task
    await producer.close()
    assert [r.value for r in batch[SSP("local", "events", 0)]] == [b"late"]
    await consumer.close()


# -- errors and configuration ----------------------------------------------------------


async def test_rows_and_records_write_alike_and_raw_fetches_read_alike(
        system: LocalSystem) -> None:
    """The worker's way in and out — `produce_rows` / a commit of rows, `fetch_raw` — lands
    and reads every field exactly as `produce` / `fetch` do: partitions (explicit, by key,
    round robin without a key), None keys and values, timestamps, headers, positions."""
    await system.create_stream("rows", 3)
    await system.create_stream("recs", 3)
    def rows(stream: str) -> list[ProducerRow]:
        return [(stream, None if i % 7 == 0 else b"k%d" % (i % 11),
                 None if i % 5 == 0 and i % 7 else b"v%d" % i,
                 i % 3 if i % 4 == 0 else None, 1_000 + i if i % 2 else None,
                 (("h", b"%d" % i),) if i % 6 == 0 else ()) for i in range(300)]

    landed_rows = await system.produce_rows(rows("rows")[:150], positions=40)
    landed_rows += await system.commit(CommitRequest("j", 1, rows("rows")[150:], (),
                                                     positions=150))
    landed_recs = await system.produce([ProducerRecord(*r) for r in rows("recs")[:150]],
                                       positions=40)
    landed_recs += await system.commit(CommitRequest(
        "j", 1, [ProducerRecord(*r) for r in rows("recs")[150:]], (), positions=150))
    assert len(landed_rows) == 190
    assert [(p.partition, p.offset) for p in landed_rows] == [
        (p.partition, p.offset) for p in landed_recs]

    async def read(stream: str, raw: bool) -> list[Record]:
        consumer = system.consumer()
        consumer.assign({SSP("local", stream, p): 0 for p in range(3)})
        fetch = consumer.fetch_raw if raw else consumer.fetch
        got: list[Record] = []
        while len(got) < 300:
            for ssp, batch in (await fetch(64, 500)).items():
                got += [as_record(ssp.partition, one) for one in batch]
        await consumer.close()
        return got

    raw_rows = await read("rows", True)
    assert all(type(one) is Record for one in raw_rows)
    fetched = await read("recs", False)

    def fields(records: list[Record]) -> list[str]:
        return sorted(repr((r.partition, r.offset, r.key, r.value, r.headers,
                            r.timestamp if r.timestamp < 10**6 else None)) for r in records)

    assert fields(raw_rows) == fields(fetched)
    assert sorted(repr((r.key, r.value, r.headers)) for r in raw_rows) == sorted(
        repr((k, v, h)) for _, k, v, _, _, h in rows("rows"))
    by_value = {row[2]: row for row in rows("rows") if row[2] is not None}
    for r in raw_rows:  # explicit partitions and keyed records land where they must
        sent = by_value.get(r.value)
        if sent is not None and sent[3] is not None:
            assert r.partition == sent[3]
        elif sent is not None and r.key is not None:
            assert r.partition == partition_for_key(r.key, 3)


async def test_a_lock_held_too_long_names_the_file(tmp_path: Path) -> None:
    system = LocalSystem("local", tmp_path, {"busy_timeout_ms": 50})
    await system.create_stream("events", 1)
    holder = sqlite3.connect(tmp_path / "log.sqlite3", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(SystemUnavailableError, match=str(tmp_path / "log.sqlite3")):
            await system.produce([ProducerRecord("events", b"k", b"v")])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (await system.produce([ProducerRecord("events", b"k", b"v")]))[0].offset == 0
    await system.close()


def test_headers_round_trip_through_their_encoding() -> None:
    headers = (("trace", b"\x00\x01"), ("", b""), ("ü", b"x" * 70_000))
    assert decode_headers(encode_headers(headers)) == headers
    assert encode_headers(()) is None and decode_headers(None) == ()


class Settings:
    def __init__(self, **fields: object) -> None:
        self.__dict__.update({"path": None, "bootstrap": None, "client_options": {}, **fields})


def test_open_system_builds_a_local_system(tmp_path: Path) -> None:
    system = open_system(Settings(name="main", type="local", path=tmp_path,  # type: ignore[arg-type]
                                  client_options={"synchronous": "FULL"}))
    assert isinstance(system, LocalSystem)
    assert (system.name, system.path, system.options.synchronous) == ("main", tmp_path, "FULL")


@pytest.mark.parametrize(("fields", "message"), [
    ({"type": "local"}, r"\[systems.main\] is a local system without `path`"),
    ({"type": "kafka"}, r"\[systems.main\] is a kafka system without `bootstrap`"),
    ({"type": "pulsar"}, r"\[systems.main\] type = 'pulsar': use one of \['local', 'kafka'\]"),
    ({"type": "local", "path": Path("x"), "client_options": {"bus_timeout": 1}},
     r"unknown option\(s\) \['bus_timeout'\]"),
])
def test_open_system_names_the_config_error(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        open_system(Settings(name="main", **fields))  # type: ignore[arg-type]


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "produce":
        asyncio.run(child_produce(Path(args[0]), args[1], int(args[2]), int(args[3]),
                                  int(args[4])))
    elif mode == "commit-loop":
        asyncio.run(child_commit_loop(Path(args[0]), args[1]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


async def test_fetch_raw_reads_on_the_callers_thread_with_its_own_connection(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's reads run on its loop's thread (no hand-over to the system's thread),
    on a connection of the consumer's own that a held write lock does not block; closing
    the consumer closes it."""
    import threading

    import framework.systems.local.system as local

    threads: list[int] = []
    read_batch = local.read_batch

    def spy(*args: object) -> object:
        threads.append(threading.get_ident())
        return read_batch(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(local, "read_batch", spy)
    system = LocalSystem("local", tmp_path / "log")
    writer = None
    try:
        await system.create_stream("s", 2)
        await system.produce([ProducerRecord("s", f"k{n}".encode(), b"v", partition=n % 2)
                              for n in range(10)])
        consumer = system.consumer()
        consumer.assign({SSP("local", "s", 0): 0, SSP("local", "s", 1): 2})
        writer = sqlite3.connect(database_file(tmp_path / "log"), isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")  # another process in the middle of a write
        batch = await asyncio.wait_for(consumer.fetch_raw(100, 0), 5)
        assert {ssp.partition: [r.offset for r in records] for ssp, records in batch.items()
                } == {0: [0, 1, 2, 3, 4], 1: [2, 3, 4]}
        assert threads == [threading.get_ident()]
        reader = consumer._reader
        assert reader is not None
        await consumer.close()
        with pytest.raises(sqlite3.ProgrammingError):  # closed with the consumer
            reader.conn.execute("SELECT 1")
    finally:
        if writer is not None:
            writer.close()
        await system.close()
