"""A worker's outputs to the local log go as columns (`OutputColumns`): same records,
same partitions, same order as rows; anything columns cannot carry goes as rows."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jobs import harness as h
from jobs import jobfiles as jf
from jobs import outputs as out
from kafka_broker import TansuBroker

from framework.config import JobConfig, parse_config
from framework.drill.verify import read_stream
from framework.errors import FencedError
from framework.partitioner import partition_for_key
from framework.systems.base import CommitRequest, OutputColumns, ProducerRecord, System
from framework.systems.local.system import LocalSystem
from framework.systems.placement import Placement
from framework.worker.codec import RecordCodec


def _codec(tmp_path: Path) -> RecordCodec:
    config = parse_config({
        "job": {"name": "j", "task": "t:T", "inputs": ["local.in"]},
        "systems": {"local": {"type": "local"},
                    "kafka": {"type": "kafka", "bootstrap": "127.0.0.1:9"}},
        "streams": {"local.in": {}, "local.out": {"value_serde": "json"},
                    "local.other": {"key_serde": "string", "value_serde": "string"},
                    "local.raw": {"key_serde": "bytes", "value_serde": "bytes"},
                    "kafka.out": {"value_serde": "json"}},
    }, tmp_path / "job.toml")
    return RecordCodec(config)


def test_plain_sends_become_one_column_pair_per_stream_others_rows(tmp_path: Path) -> None:
    sent = [("local.out", "a", 1, None, None, None), ("kafka.out", "k", 2, None, None, None),
            ("local.other", "b", "x", None, None, None), ("local.out", "c", None, None, None,
                                                            None),
            ("kafka.out", "k", 3, 1, 7, {"h": b"v"}), ("local.out", "a", {"n": 2}, None, None,
                                                         {})]
    split = _codec(tmp_path).encode_columns(sent, "local", {"kafka"})
    assert split is not None
    columns, rows = split
    assert columns == [OutputColumns("out", [b"a", b"c", b"a"], [b"1", None, b'{"n":2}']),
                       OutputColumns("other", [b"b"], [b"x"])]
    assert rows == {"kafka": [("out", b"k", b"2", None, None, ()),
                              ("out", b"k", b"3", 1, 7, (("h", b"v"),))]}


@pytest.mark.parametrize("send", [
    ("local.out", None, 1, None, None, None),           # no key: round robin
    ("local.out", "a", 1, 2, None, None),               # an explicit partition
    ("local.out", "a", 1, None, 5, None),               # a timestamp
    ("local.out", "a", 1, None, None, {"h": b"v"}),     # headers
    ("local.out", "a", {1, 2}, None, None, None),       # a value its serde refuses
    ("local.raw", "a", b"v", None, None, None),         # a key its serde refuses
    ("local.other", "a", 5, None, None, None),          # not a str for the string serde
], ids=["keyless", "partition", "timestamp", "headers", "bad-value", "bad-key", "not-str"])
def test_a_send_columns_cannot_carry_sends_the_commit_to_rows(tmp_path: Path,
                                                              send: tuple) -> None:
    plain = ("local.out", "a", 1, None, None, None)
    assert _codec(tmp_path).encode_columns([plain, send, plain], "local", set()) is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=6), st.one_of(st.none(), st.binary(max_size=4))),
                max_size=60),
       st.integers(1, 9))
def test_grouping_keeps_each_records_partition_and_order(records: list, count: int) -> None:
    columns = OutputColumns("s", [k for k, _ in records], [v for _, v in records])
    want: list[list[bytes | None]] = [[] for _ in range(count)]
    for key, value in records:
        want[partition_for_key(key, count)] += [key, value]
    assert Placement.group(columns, count) == want


async def _all(system: LocalSystem, stream: str, partitions: int) -> dict[int, list[tuple]]:
    found = {}
    for partition in range(partitions):
        offsets, keys, values, _, headers = await system.read_record_columns(
            stream, partition, 0, 1 << 40, 1 << 20)
        found[partition] = list(zip(offsets, keys, values, headers, strict=True))
    return found


async def test_a_commit_writes_rows_then_columns_in_one_transaction(tmp_path: Path) -> None:
    system = LocalSystem("local", tmp_path / "log")
    try:
        await system.create_stream("out", 3)
        await system.produce([ProducerRecord("out", b"k1", b"before")])
        await system.fence("j", 1)
        keys = [f"k{n % 7}".encode() for n in range(2_500)]  # more than a batch's 1,000
        values = [None if n % 11 == 0 else str(n).encode() for n in range(2_500)]
        positions = await system.commit(CommitRequest(
            "j", 1, [("out", b"k1", b"row", None, None, ())], (), positions=1,
            columns=[OutputColumns("out", keys[:2_000], values[:2_000]),
                     OutputColumns("out", keys[2_000:], values[2_000:])]))
        home = partition_for_key(b"k1", 3)
        assert [(p.partition, p.offset) for p in positions] == [(home, 1)]
        want: dict[int, list[tuple]] = {p: [] for p in range(3)}
        want[home] += [(0, b"k1", b"before", ()), (1, b"k1", b"row", ())]
        for key, value in zip(keys, values, strict=True):
            slot = want[partition_for_key(key, 3)]
            slot.append((len(slot), key, value, ()))
        assert await _all(system, "out", 3) == want
        ends = {p: r.end for p, r in (await system.offsets("out")).items()}
        assert ends == {p: len(rows) for p, rows in want.items()}
    finally:
        await system.close()


async def test_a_fenced_commit_writes_no_columns(tmp_path: Path) -> None:
    system = LocalSystem("local", tmp_path / "log")
    try:
        await system.create_stream("out", 2)
        await system.fence("j", 2)
        with pytest.raises(FencedError):
            await system.commit(CommitRequest("j", 1, columns=[
                OutputColumns("out", [b"a", b"b"], [b"1", b"2"])]))
        assert {p: r.end for p, r in (await system.offsets("out")).items()} == {0: 0, 1: 0}
    finally:
        await system.close()


@pytest.fixture
def tried(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each `RecordCodec.encode_columns` call of the test: whether columns carried it."""
    calls: list[bool] = []
    encode_columns = RecordCodec.encode_columns

    def spy(self: RecordCodec, *args: Any) -> Any:
        split = encode_columns(self, *args)
        calls.append(split is not None)
        return split

    monkeypatch.setattr(RecordCodec, "encode_columns", spy)
    return calls


SWITCH_RECORDS = 24_000  # ~6,000 per partition: past offset 3,000 of partition 0


async def _switch_exactly(config: JobConfig, meta: System, tried: list[bool]) -> None:
    """Run `LateHeadersTask` over its input: columns first, rows from the header on, and
    every output and the store exact."""
    model = await h.prepare(config, meta)
    work = out.Workload(200, stream=jf.streams(config)[0])
    await h.produce(meta, work.records(SWITCH_RECORDS))
    _, result = await h.run_worker(config, model, SWITCH_RECORDS)
    assert (result.processed, result.reason) == (SWITCH_RECORDS, "stopped")
    assert tried[-1] is False and tried.count(False) == 1 and tried.count(True) >= 1
    assert out.exact_problems(await out.outputs(meta, config), work) == []
    assert await out.changelog_state(meta, config) == work.totals


async def test_a_worker_switching_from_columns_to_rows_mid_run_stays_exact(
        tmp_path: Path, tried: list[bool]) -> None:
    """Commits as columns until the task sends a record with headers, as rows after it:
    every output once, in order per key, in its key's partition, the header kept."""
    config = jf.load(jf.write_job(tmp_path / "job", task="late_headers_task:LateHeadersTask"))
    meta = await h.open_meta(config)
    try:
        await _switch_exactly(config, meta, tried)
        found = await _all(meta, jf.streams(config)[1], jf.PARTITIONS)  # type: ignore[arg-type]
        assert sum(map(len, found.values())) == SWITCH_RECORDS
        for partition, rows in found.items():
            assert [offset for offset, *_ in rows] == list(range(len(rows)))
            assert {partition_for_key(key, jf.PARTITIONS) for _, key, _, _ in rows} <= {partition}
        assert [headers for rows in found.values() for *_, headers in rows
                if headers] == [(("late", b"1"),)]
    finally:
        await meta.close()


async def test_a_kafka_worker_switching_from_columns_to_rows_stays_exact(
        tmp_path: Path, tried: list[bool], kafka_broker: TansuBroker) -> None:
    """The same switch on a Kafka-protocol broker (at-least-once, no crash: exactly once
    here): every output once, in order per key, in its key's partition."""
    unique = uuid.uuid4().hex[:8]
    config = jf.load(jf.write_job(tmp_path / "job", name=f"cols-{unique}", system="kafka",
                                bootstrap=kafka_broker.bootstrap, events=f"events-{unique}",
                                task="late_headers_task:LateHeadersTask"))
    meta = await h.open_meta(config)
    try:
        await _switch_exactly(config, meta, tried)
        found = await read_stream(meta, jf.streams(config)[1])
        assert sum(map(len, found.values())) == SWITCH_RECORDS
        for partition, rows in found.items():
            assert {partition_for_key(key, jf.PARTITIONS) for key, _ in rows} <= {partition}
    finally:
        await meta.close()
