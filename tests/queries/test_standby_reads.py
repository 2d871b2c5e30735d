"""Standby reads (``max_lag``): the client's acceptance rule, and a host's standby-read
endpoint over a real RocksDB copy and a real local log, asked by the client when the
key's owner does not answer."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
from queryjobs import TASKS, Job, start_job, stop

from framework.cli import main
from framework.metadata import publish_model, read_state
from framework.metadata.jobmodel import JobModel
from framework.queries.client import Client, standby_acceptable
from framework.queries.errors import EndpointUnreachableError, TaskUnavailableError
from framework.queries.standby import StandbyServer
from framework.stores.base import ChangelogPosition
from framework.stores.rocksdb import RocksDBEngine
from framework.systems.base import ProducerRecord

CHANGELOG = "wc-counts-changelog"


@pytest.mark.parametrize(("lag", "position", "max_lag", "floor", "accepted"), [
    (0, 5, 0, None, True),      # current, nothing seen yet
    (3, 5, 3, None, True),      # lag at the bound
    (4, 5, 3, None, False),     # lag over the bound
    (0, 5, 10, 5, True),        # at the highest position seen
    (0, 4, 10, 5, False),       # below it: would go backwards
    (0, 9, 10, 5, True),        # above it
])
def test_a_standby_answer_is_accepted_only_within_max_lag_and_never_backwards(
        lag: int, position: int, max_lag: int, floor: int | None, accepted: bool) -> None:
    assert standby_acceptable(lag, position, max_lag, floor) is accepted


@dataclass
class FakeCopies:
    engines: dict[tuple[str, str], RocksDBEngine] = field(default_factory=dict)

    def copy_of(self, task: str, store: str) -> RocksDBEngine | None:
        return self.engines.get((task, store))


@dataclass
class FakeHost:
    name: str
    model: JobModel | None
    replicas: FakeCopies | None


@dataclass
class Standby:
    job: Job
    host: FakeHost
    server: StandbyServer
    copy: RocksDBEngine


@pytest.fixture
async def standby(tmp_path: Path) -> AsyncIterator[Standby]:
    """The two-worker job, host "h" keeping a standby copy of task Partition 0's store
    (its changelog partition 0 holding 5 records; the copy applied 3 of them)."""
    job = await start_job(tmp_path)
    model = job.workers[0].model
    assert model is not None
    model = await publish_model(job.system, job.config, dataclasses.replace(
        model, epoch=model.epoch + 1, hosts={"g": (0, 1), "h": ()},
        standbys={TASKS[0]: ("h",)}))
    for worker in job.workers:
        worker.model = model
    await job.system.create_stream(CHANGELOG, 2, compacted=True, exist_ok=True)
    words = [w for w in (f"word-{i}" for i in range(40)) if job.task_of(w) == TASKS[0]][:5]
    await job.system.produce([ProducerRecord(CHANGELOG, w.encode(), json.dumps(i).encode(), 0)
                              for i, w in enumerate(words)])
    copy = RocksDBEngine(tmp_path / "copies" / TASKS[0])
    copy.write_batch({w.encode(): json.dumps(i).encode() for i, w in enumerate(words[:3])},
                     ChangelogPosition(CHANGELOG, 0, 3))
    host = FakeHost("h", model, FakeCopies({(TASKS[0], "counts"): copy}))
    server = StandbyServer(job.config, host, job.system)
    await server.start()
    try:
        yield Standby(job, host, server, copy)
    finally:
        await server.close()
        copy.close()
        await stop(job)


def word_of(standby: Standby, index: int) -> str:
    return [w for w in (f"word-{i}" for i in range(40))
            if standby.job.task_of(w) == TASKS[0]][index]


async def test_the_host_publishes_its_standby_endpoint(standby: Standby) -> None:
    state = await read_state(standby.job.system, standby.job.config)
    assert state is not None and state.standby_queries["h"].url == standby.server.url


async def test_the_standby_endpoint_answers_value_position_and_lag(standby: Standby) -> None:
    async with aiohttp.ClientSession() as session, session.get(
            f"{standby.server.url}/v1/stores/counts/standby",
            params={"key": word_of(standby, 1)}) as answer:
        document = await answer.json()
    assert answer.status == 200
    assert (document["found"], document["value"], document["task"], document["position"],
            document["committed_end"], document["lag"]) == (True, 1, TASKS[0], 3, 5, 2)


async def test_a_key_of_a_task_without_a_copy_here_answers_503(standby: Standby) -> None:
    other = next(w for w in (f"word-{i}" for i in range(40))
                 if standby.job.task_of(w) == TASKS[1])
    async with aiohttp.ClientSession() as session, session.get(
            f"{standby.server.url}/v1/stores/counts/standby", params={"key": other}) as answer:
        assert answer.status == 503 and "Retry-After" in answer.headers


async def test_an_unavailable_owner_is_answered_by_the_standby_within_max_lag(
        standby: Standby) -> None:
    await standby.job.servers[0].close()  # task Partition 0's worker endpoint is gone
    async with Client(standby.job.config, retry_for=0) as client:
        answer = await client.get("counts", word_of(standby, 2), max_lag=2)
    assert (answer.found, answer.value, answer.standby, answer.lag, answer.position) == (
        True, 2, "h", 2, 3)


async def test_a_standby_lagging_more_than_max_lag_is_not_answered(standby: Standby) -> None:
    await standby.job.servers[0].close()
    async with Client(standby.job.config, retry_for=0) as client:
        with pytest.raises((TaskUnavailableError, EndpointUnreachableError)):
            await client.get("counts", word_of(standby, 2), max_lag=1)
        assert client.standby_refused >= 1


async def test_a_standby_behind_an_answer_already_seen_is_not_answered(
        standby: Standby) -> None:
    standby.job.commit(TASKS[0], {word_of(standby, 0): 7}, 4)
    async with Client(standby.job.config, retry_for=0) as client:
        first = await client.get("counts", word_of(standby, 0), max_lag=5)
        assert (first.standby, first.position) == (None, 4)  # the owner
        await standby.job.servers[0].close()
        with pytest.raises((TaskUnavailableError, EndpointUnreachableError)):
            await client.get("counts", word_of(standby, 0), max_lag=5)
        assert client.standby_refused >= 1


async def test_without_max_lag_an_unavailable_owner_is_not_answered_by_a_standby(
        standby: Standby) -> None:
    await standby.job.servers[0].close()
    async with Client(standby.job.config, retry_for=0) as client:
        with pytest.raises((TaskUnavailableError, EndpointUnreachableError)):
            await client.get("counts", word_of(standby, 2))
        assert client.standby_answers == 0


# -- scans: a task whose owner does not answer gives its part from a standby copy -------

def words_of(standby: Standby, task: str) -> list[str]:
    return [w for w in (f"word-{i}" for i in range(40)) if standby.job.task_of(w) == task]


async def test_the_standby_endpoint_scans_a_tasks_copy_with_position_and_lag(
        standby: Standby) -> None:
    async with aiohttp.ClientSession() as session, session.get(
            f"{standby.server.url}/v1/stores/counts/standby-scan",
            params={"task": TASKS[0]}) as answer:
        document = await answer.json()
    assert answer.status == 200
    copied = words_of(standby, TASKS[0])[:3]
    assert sorted((e["key"], e["value"]) for e in document["entries"]) == sorted(
        (w, i) for i, w in enumerate(copied))
    assert (document["task"], document["position"], document["committed_end"],
            document["lag"], document["full"]) == (TASKS[0], 3, 5, 2, False)


@pytest.mark.parametrize("kind", ["prefix", "range"])
async def test_a_scan_with_an_unavailable_owner_takes_that_tasks_part_from_its_standby(
        standby: Standby, kind: str) -> None:
    owned = words_of(standby, TASKS[1])[:2]
    standby.job.commit(TASKS[1], {w: 10 + i for i, w in enumerate(owned)}, 2)
    await standby.job.servers[0].close()  # task Partition 0's worker endpoint is gone
    async with Client(standby.job.config, retry_for=0) as client:
        page = (await client.prefix("counts", "word-", max_lag=2) if kind == "prefix"
                else await client.range("counts", "word-", "word-~", max_lag=2))
        assert client.standby_answers == 1
    expected = {**{w: i for i, w in enumerate(words_of(standby, TASKS[0])[:3])},
                **{w: 10 + i for i, w in enumerate(owned)}}
    assert page.entries == sorted(expected.items())  # serialized order: the text's
    assert (page.standbys, dict(page.positions), page.next) == (
        {TASKS[0]: "h"}, {TASKS[0]: 3, TASKS[1]: 2}, None)


async def test_a_scan_page_from_a_standby_continues_after_its_last_key(
        standby: Standby) -> None:
    await standby.job.servers[0].close()
    copied = sorted(words_of(standby, TASKS[0])[:3])
    async with Client(standby.job.config, retry_for=0) as client:
        first = await client.prefix("counts", "word-", limit=2, max_lag=2)
        rest = await client.prefix("counts", "word-", limit=2, after=first.next, max_lag=2)
    assert [k for k, _ in first.entries] == copied[:2] and first.next is not None
    assert ([k for k, _ in rest.entries], rest.next) == (copied[2:], None)


async def test_a_scan_whose_standby_lags_more_than_max_lag_is_not_answered(
        standby: Standby) -> None:
    await standby.job.servers[0].close()
    async with Client(standby.job.config, retry_for=0) as client:
        with pytest.raises((TaskUnavailableError, EndpointUnreachableError)):
            await client.prefix("counts", "word-", max_lag=1)
        assert client.standby_refused >= 1


async def test_without_max_lag_a_scan_with_an_unavailable_owner_is_not_answered(
        standby: Standby) -> None:
    await standby.job.servers[0].close()
    async with Client(standby.job.config, retry_for=0) as client:
        with pytest.raises((TaskUnavailableError, EndpointUnreachableError)):
            await client.range("counts", "word-", "word-~")
        assert client.standby_answers == 0


async def test_sampan_query_prints_a_scan_with_a_standby_part_under_max_lag(
        standby: Standby, capsys: pytest.CaptureFixture[str]) -> None:
    await standby.job.servers[0].close()
    status = await asyncio.to_thread(main, ["query", str(standby.job.config.path), "counts",
                                            "--prefix", "word-", "--max-lag", "2",
                                            "--wait", "0"])
    copied = sorted((w, i) for i, w in enumerate(words_of(standby, TASKS[0])[:3]))
    assert (status, capsys.readouterr().out) == (
        0, "".join(f"{w}\t{i}\n" for w, i in copied))
