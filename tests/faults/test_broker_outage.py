"""A running job whose only Apache Kafka broker stops: it waits, says so, and resumes
exactly once the broker is back — or, past ``coordinator.max_unreachable_ms``, stops with
one line and resumes exactly on its next start."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

import pytest
from jobs import harness as h
from jobs import jobfiles as jf
from jobs import outputs as out
from jobs.outputs import checkpointed, exact_outputs
from jobs.runs import SumRun
from kafka_broker import KafkaBroker

from framework.coordinator.runfile import read_run_file, run_file

RECORDS = 20_000
KEYS = 500
TIMEOUT_S = 3
"""The system's ``timeout_s`` (bound on every broker call) in both runs."""
OUTAGE_S = 4 * TIMEOUT_S
"""Long enough that every client's calls fail and time out several times over."""


async def _produce(run: SumRun, work: out.Workload, count: int) -> None:
    meta = await h.open_meta(run.config)
    try:
        await h.produce(meta, work.records(count))
    finally:
        await meta.close()


async def _checkpointed(run: SumRun) -> int:
    meta = await h.open_meta(run.config)
    try:
        return await checkpointed(meta, run.config)
    finally:
        await meta.close()


async def _problems(run: SumRun, work: out.Workload) -> list[str]:
    meta = await h.open_meta(run.config)
    try:
        return await exact_outputs(meta, run.config, work)
    finally:
        await meta.close()


@pytest.mark.timeout(900)
async def test_a_broker_stopped_past_the_call_timeout_is_waited_for_then_the_job_resumes(
        kafka_own_broker: KafkaBroker, tmp_path: Path) -> None:
    """The broker is stopped (SIGTERM) mid-run for 12 s, four times the system's
    ``timeout_s`` of 3 s, and started again on its own log folders: `sampan status` says
    degraded, naming the system and since when; the same worker processes resume (no
    restart at all) and every output is there exactly once."""
    run = SumRun(tmp_path / "job", kafka_own_broker.bootstrap, timeout_s=TIMEOUT_S)
    events = jf.streams(run.config)[0]
    work = out.Workload(KEYS, stream=events)
    node = kafka_own_broker.nodes[0]
    run.start()
    try:
        async def healthy() -> bool:
            return run.status()[0] == 0
        await run.wait(healthy, "a healthy job", 180)
        await _produce(run, work, RECORDS // 2)

        async def some_committed() -> bool:
            return await _checkpointed(run) >= RECORDS // 8
        await run.wait(some_committed, "the first commits", 180)
        pids = run.worker_pids()
        assert sorted(pids) == [0, 1]
        stopped = time.monotonic()
        node.stop()

        async def degraded() -> bool:
            code, document = run.status()
            return code == 1 and any(p.startswith("system 'kafka' unreachable since ")
                                     for p in document.get("problems", ()))
        await run.wait(degraded, "status to report the broker unreachable", 120)
        shown = run.status()[1]
        assert (shown["state"], shown["health"]) == ("running", "degraded"), shown
        await asyncio.sleep(max(0.0, OUTAGE_S - (time.monotonic() - stopped)))
        assert run.process is not None and run.process.poll() is None
        await asyncio.to_thread(kafka_own_broker.start, node)
        await _produce(run, work, RECORDS - RECORDS // 2)

        async def everything_committed() -> bool:
            return await _checkpointed(run) >= RECORDS
        await run.wait(everything_committed, "every input committed after the outage", 300)
        await run.wait(healthy, "a healthy job again", 120)
        assert run.status()[1]["restarts"] == 0, run.logs_text()
        run_record = read_run_file(run_file(run.config.state_dir))
        assert run_record is not None and run_record.unreachable == []
        assert run.worker_pids() == pids
        assert await run.stop() == 0
    finally:
        run.kill()
    assert await _problems(run, work) == []
    text = run.logs_text(tail=10**7)
    assert "unreachable" in text
    assert "resuming from the last commit" in text
    assert "Traceback" not in text, text


@pytest.mark.timeout(900)
async def test_an_outage_past_max_unreachable_ms_stops_the_job_with_one_line(
        kafka_own_broker: KafkaBroker, tmp_path: Path) -> None:
    """Past ``coordinator.max_unreachable_ms`` (5 s here) `sampan run` exits 2 with one
    line naming the brokers and what to check, and no traceback anywhere; `sampan status`
    says failed (exit 4) with that line; once the broker is back, the next `sampan run`
    resumes and every output is there exactly once."""
    run = SumRun(tmp_path / "job", kafka_own_broker.bootstrap, timeout_s=TIMEOUT_S,
                 coordinator="max_unreachable_ms = 5000\n")
    work = out.Workload(KEYS, stream=jf.streams(run.config)[0])
    node = kafka_own_broker.nodes[0]
    bootstrap = kafka_own_broker.bootstrap
    run.start()
    try:
        async def healthy() -> bool:
            return run.status()[0] == 0
        await run.wait(healthy, "a healthy job", 180)
        await _produce(run, work, RECORDS // 2)

        async def some_committed() -> bool:
            return await _checkpointed(run) >= RECORDS // 8
        await run.wait(some_committed, "the first commits", 240)
        node.stop()
        assert run.process is not None
        code = await asyncio.to_thread(run.process.wait, 180)
        assert code == 2, run.logs_text()
        lines = [line for line in run.coordinator_log().splitlines()
                 if line.startswith("sampan run: error: ")]
        assert len(lines) == 1, run.logs_text()
        line = lines[0]
        assert line.startswith(f"sampan run: error: Kafka at {bootstrap} (system 'kafka') "
                               "has not answered for "), line
        assert "longer than [coordinator] max_unreachable_ms = 5000" in line
        assert f"check that the brokers at {bootstrap} run" in line
        assert f"run `sampan run {run.path}` again" in line
        assert run.worker_pids() == {}
        status, document = run.status()
        assert (status, document["health"]) == (4, "failed"), document
        assert document["problems"] == [line.removeprefix("sampan run: error: ")]

        await asyncio.to_thread(kafka_own_broker.start, node)
        await _produce(run, work, RECORDS - RECORDS // 2)
        run.start()

        async def everything_committed() -> bool:
            return await _checkpointed(run) >= RECORDS
        await run.wait(everything_committed, "every input committed after a restart", 300)
        assert await run.stop() == 0
    finally:
        run.kill()
    assert await _problems(run, work) == []
    assert "Traceback" not in run.logs_text(tail=10**7)


def test_a_commit_that_lost_its_broker_is_an_outage_not_a_failure() -> None:
    """aiokafka's sender wraps a connection lost while committing a transaction in a plain
    KafkaError: the worker must wait for the broker (SystemUnavailableError), not exit."""
    from aiokafka.errors import KafkaConnectionError, KafkaError

    from framework.systems.kafka.txn import _lost_broker

    def chained(*errors: BaseException) -> BaseException:
        for outer, inner in itertools.pairwise(errors):
            outer.__cause__ = inner
        return errors[0]

    assert _lost_broker(chained(KafkaError("Unexpected error during batch delivery"),
                                KafkaError("KafkaConnectionError('closed')"),
                                KafkaConnectionError("Connection at 127.0.0.1:1 closed")))
    assert not _lost_broker(KafkaError("Unexpected error during batch delivery"))
    assert not _lost_broker(chained(KafkaError("wrapped"), ValueError("a bug")))


def test_the_clients_own_tracebacks_become_one_warning_line() -> None:
    """aiokafka logs a lost connection inside its sender with a traceback (logger.exception):
    through sampan's filter it is one WARNING line naming the error and its cause."""
    import logging

    from framework.logformat import LibraryThrottle

    try:
        try:
            raise ConnectionResetError("Connection at 127.0.0.1:1 closed")
        except ConnectionResetError as cause:
            raise RuntimeError("Unexpected error during batch delivery") from cause
    except RuntimeError as error:
        record = logging.LogRecord("aiokafka.producer.sender", logging.ERROR, __file__, 1,
                                   "Unexpected error in sender routine", None,
                                   (type(error), error, error.__traceback__))
    assert LibraryThrottle().filter(record)
    line = logging.Formatter("%(levelname)s %(message)s").format(record)
    assert line == ("WARNING Unexpected error in sender routine: RuntimeError: Unexpected "
                    "error during batch delivery <- ConnectionResetError: Connection at "
                    "127.0.0.1:1 closed")


def test_an_error_inside_the_clients_own_callback_is_one_warning_line(
        caplog: pytest.LogCaptureFixture) -> None:
    """aiokafka's sender can remove a batch twice while a broker goes away (KeyError in
    its message_accumulator callback, seen in CI): the worker's loop logs it as one WARNING
    line with no traceback; an error raised in other code still gets asyncio's report."""
    import logging

    from framework.worker.outage import quiet_client_futures

    namespace: dict[str, object] = {}
    exec(compile("def cb():\n    {}.pop('batch')\n",  # a callback "in aiokafka"
                 "/site-packages/aiokafka/producer/message_accumulator.py", "exec"), namespace)

    def ours() -> None:
        raise ValueError("a bug of ours")

    loop = asyncio.new_event_loop()
    try:
        quiet_client_futures(loop)
        with caplog.at_level(logging.DEBUG):
            loop.call_soon(namespace["cb"])  # type: ignore[arg-type]
            loop.call_soon(ours)
            loop.run_until_complete(asyncio.sleep(0.01))
    finally:
        loop.close()
    client = [r for r in caplog.records if "KeyError" in r.getMessage()]
    assert [(r.levelno, r.exc_info) for r in client] == [(logging.WARNING, None)]
    assert "Kafka client error in its own callback" in client[0].getMessage()
    other = [r for r in caplog.records if r.exc_info and "a bug of ours" in repr(r.exc_info[1])]
    assert other and other[0].levelno == logging.ERROR
