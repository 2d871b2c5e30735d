"""The peer bench's harness (`bench/peers`): the pieces that decide verdicts, and the
sampan side end to end on a small input, on the suite's Apache Kafka broker.

The Kafka Streams and Quix Streams peers are not run here (a Maven build and a virtualenv
of their own); ``python -m bench.peers`` runs them.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from kafka_broker import KafkaBroker

from bench.peers import expansion, throughput
from bench.peers.kafka_io import OutputReader, create_topics, delete_topics_with, produce
from bench.peers.peers import SampanPeer
from bench.peers.process import PeerProcess, report_line
from bench.peers.verdict import (
    CRASHED,
    DUPLICATED,
    EXACT,
    MISCOUNTED,
    MISSING,
    REFUSED,
    REORDERED,
    SHORT,
    check_outputs,
    classify,
)
from bench.peers.workload import make_workload, running_totals


def _amount(n: int) -> bytes:
    return json.dumps({"amount": n}).encode()


INPUT = [(b"exact", _amount(1)), (b"exact", _amount(2)), (b"exact", _amount(3)),
         (b"miscount", _amount(5)), (b"miscount", _amount(5)),
         (b"reorder", _amount(1)), (b"reorder", _amount(4)),
         (b"short", _amount(2)), (b"short", _amount(2)), (b"short", _amount(2)),
         (b"missing", _amount(3)), (b"missing", _amount(3)), (b"missing", _amount(3)),
         (b"duplicate", _amount(7)), (b"duplicate", _amount(1))]
"""Truth: exact 1,3,6; miscount 5,10; reorder 1,5; short 2,4,6; missing 3,6,9;
duplicate 7,8."""

OUTPUTS = {"exact": [1, 3, 6], "miscount": [5, 5], "reorder": [4, 5], "short": [2, 4],
           "missing": [3, 9], "duplicate": [7, 8, 7, 8], "stray": [1]}
"""What a faulty peer sent: one key of each kind, and a key that had no input."""


def test_running_totals_are_each_keys_sums_in_order() -> None:
    assert running_totals(INPUT) == {
        "exact": [1, 3, 6], "miscount": [5, 10], "reorder": [1, 5], "short": [2, 4, 6],
        "missing": [3, 6, 9], "duplicate": [7, 8]}


async def test_outputs_read_back_from_kafka_get_each_kind_of_verdict(
        kafka_broker: KafkaBroker) -> None:
    topic = f"peers-verdicts-{uuid.uuid4().hex[:8]}"
    await create_topics(kafka_broker.bootstrap, {topic: 4})
    sent = [(key.encode(), str(total).encode())
            for key, totals in OUTPUTS.items() for total in totals]
    await produce(kafka_broker.bootstrap, topic, 4, sent)
    async with OutputReader(kafka_broker.bootstrap, topic, 4) as reader:
        outputs = await reader.drain()
    assert outputs == OUTPUTS
    check = check_outputs(running_totals(INPUT), outputs)
    assert (sorted(check.miscounted), sorted(check.reordered), sorted(check.short),
            sorted(check.missing), sorted(check.duplicated)) == (
        ["miscount", "stray"], ["reorder"], ["short"], ["missing"], ["duplicate"])
    assert check.keys == 6 and check.expected == 15 and check.received == 16
    assert check.wrong == 3
    assert check.worst()[0] == MISCOUNTED
    assert check.miscounted["miscount"] == "last total 5, true total 10; 2 outputs for 2 records"
    assert classify(error=None, processed=True, check=check).verdict == MISCOUNTED


async def test_a_drain_waits_for_the_markers_of_a_commit_and_not_for_an_open_transaction(
        kafka_broker: KafkaBroker) -> None:
    """A transaction committed while the drain settles is read (its commit's markers land
    after the peer exits: a fresh-clone run's drain came back short without this); one
    left open past ``settle_s`` stays outside, and the drain returns."""
    topic = f"peers-settle-{uuid.uuid4().hex[:8]}"
    await create_topics(kafka_broker.bootstrap, {topic: 2})
    producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap,
                                transactional_id=f"{topic}-txn", enable_idempotence=True)
    await producer.start()
    try:
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"7", key=b"a", partition=0)

        async def commit_soon() -> None:
            await asyncio.sleep(1.0)
            await producer.commit_transaction()

        async with OutputReader(kafka_broker.bootstrap, topic, 2) as reader:
            committing = asyncio.create_task(commit_soon())
            outputs = await reader.drain()
            await committing
        assert outputs == {"a": [7]}
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"8", key=b"b", partition=1)
        async with OutputReader(kafka_broker.bootstrap, topic, 2) as reader:
            outputs = await reader.drain(settle_s=1.0)
        assert outputs == {"a": [7]}
        await producer.abort_transaction()
    finally:
        await producer.stop()
        await delete_topics_with(kafka_broker.bootstrap, topic)


@pytest.mark.parametrize(("outputs", "verdict"), [
    ({"a": [1, 3], "b": [2]}, EXACT),
    ({"a": [1, 3], "b": [2, 2]}, DUPLICATED),
    ({"a": [3], "b": [2]}, MISSING),
    ({"a": [1], "b": [2]}, SHORT),
    ({"a": [2, 3], "b": [2]}, REORDERED),
    ({"a": [1, 2], "b": [2]}, MISCOUNTED),
    ({"a": [1, 3]}, SHORT),
])
def test_a_finished_run_is_judged_by_its_worst_key(outputs: dict[str, list[int]],
                                                   verdict: str) -> None:
    truth = {"a": [1, 3], "b": [2]}
    assert classify(error=None, processed=True,
                    check=check_outputs(truth, outputs)).verdict == verdict


def test_an_error_is_a_refusal_before_the_first_record_and_a_crash_after() -> None:
    truth = {"a": [1, 3], "b": [2]}
    refused = classify(error="TopicConfigurationMismatch: expected 4, got 2",
                       processed=False, check=check_outputs(truth, {}))
    assert (refused.verdict, refused.detail) == (
        REFUSED, "TopicConfigurationMismatch: expected 4, got 2")
    crashed = classify(error="StreamsException: invalid partitions", processed=True,
                       check=check_outputs(truth, {"a": [1]}))
    assert crashed.verdict == CRASHED
    assert crashed.detail == ("StreamsException: invalid partitions (1 of 3 outputs sent "
                              "by then, all of them right)")
    wrong = classify(error="boom", processed=True, check=check_outputs(truth, {"a": [2]}))
    assert wrong.detail.endswith("(1 of 3 outputs sent by then, 1 keys with a wrong total "
                                 "among them)")
    with pytest.raises(ValueError, match="needs its outputs checked"):
        classify(error=None, processed=True, check=None)


def test_a_peer_process_reports_its_error_its_exit_and_its_rusage(tmp_path: Path) -> None:
    script = ("import sys\n"
              f"print({report_line({'records': 0, 'error': 'Refused: bad topic'})!r})\n"
              "sys.exit(3)\n")
    result = PeerProcess([sys.executable, "-c", script], tmp_path / "a.log").wait(60)
    assert (result.exit_code, result.error, result.records) == (3, "Refused: bad topic", 0)
    assert result.peak_rss_mib > 0 and result.cpu_total_s > 0
    silent = PeerProcess([sys.executable, "-c", "print('dying'); raise SystemExit(7)"],
                         tmp_path / "b.log").wait(60)
    assert (silent.report, silent.error) == (None, "exit code 7: dying")
    sleeper = PeerProcess([sys.executable, "-c", "import time; time.sleep(600)"],
                          tmp_path / "c.log")
    stopped = sleeper.stop(timeout_s=60)
    assert stopped.exit_code == -15 and stopped.error == "killed by signal 15: "


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_the_sampan_peer_sums_a_small_input_exactly(kafka_broker: KafkaBroker, tmp_path: Path,
                                                    guarantee: str) -> None:
    workload = make_workload(3_000, 200)
    topic = asyncio.run(throughput.prepare_input(kafka_broker.bootstrap, workload))
    run = throughput.measure(SampanPeer(), kafka_broker.bootstrap, topic, workload.truth(),
                             len(workload), guarantee, 0, tmp_path)
    assert run.outcome.verdict == EXACT, run.outcome.text()
    assert run.outcome.detail == "200 keys, 3,000 outputs, all exact"
    assert run.result.records == 3_000 and run.result.exit_code == 0
    assert run.rate > 0 and run.cpu_us > 0 and run.startup_s > 0
    assert run.result.peak_rss_mib > 0


def test_sampan_run_goes_through_a_live_expansion_exactly(kafka_broker: KafkaBroker,
                                                          tmp_path: Path) -> None:
    plan = expansion.Plan(keys=50, warmup=300, before=1_000, after=1_000, rate=500.0,
                          stall_s=60.0)
    run = expansion.run_one(SampanPeer(), kafka_broker.bootstrap, "at-least-once", tmp_path,
                            plan)
    assert run.outcome.verdict == EXACT, run.outcome.text()
    assert run.final.detail == "50 keys, 2,300 outputs, all exact"
    assert run.restarted is None and run.caught_up_s is not None
