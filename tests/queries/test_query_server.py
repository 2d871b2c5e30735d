"""Two workers' query endpoints over real RocksDB stores and a real local log: committed
reads, forwarding to the owner, owner lookups, 503 with Retry-After while a task is not
running, scans merged across tasks, the bearer token, and the client's retries."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from queryjobs import TASKS, WORDS, Job, start_job, stop

from framework.config.serdes import get_serde
from framework.metadata import read_state
from framework.partitioner import partition_for_key
from framework.queries.client import Client
from framework.queries.errors import NotQueryableError, QueryAuthError, TaskUnavailableError
from framework.stores.base import ChangelogPosition
from framework.stores.buffer import TaskStore
from framework.stores.rocksdb import RocksDBEngine


@pytest.fixture
async def job(tmp_path: Path) -> AsyncIterator[Job]:
    started = await start_job(tmp_path)
    yield started
    await stop(started)


async def fetch(url: str, **params: str) -> tuple[int, dict[str, Any], Mapping[str, str]]:
    async with aiohttp.ClientSession() as session, session.get(url, params=params) as answer:
        return answer.status, await answer.json(), dict(answer.headers)


def counts(words: list[str]) -> Iterator[tuple[str, int]]:
    return ((word, i + 1) for i, word in enumerate(words))


async def test_each_endpoint_publishes_its_url_in_the_coordinator_stream(job: Job) -> None:
    state = await read_state(job.system, job.config)
    assert {w: e.url for w, e in state.queries.items()} == {
        0: job.servers[0].url, 1: job.servers[1].url}
    assert all(str(e.url).startswith("http://127.0.0.1:") for e in state.queries.values())


async def test_a_get_answers_committed_state_not_the_write_buffer(job: Job) -> None:
    task = job.task_of("apple")
    job.commit(task, {"apple": 1}, 7)
    job.stores[task].put("apple", 2)  # buffered: a crash would roll it back
    url = f"{job.servers[0].url}/v1/stores/counts/get"
    status, committed, _ = await fetch(url, key="apple")
    assert status == 200
    assert {k: committed[k] for k in ("found", "value", "task", "position", "epoch")} == {
        "found": True, "value": 1, "task": task, "position": 7, "epoch": 1}
    _, uncommitted, _ = await fetch(url, key="apple", consistency="uncommitted")
    assert uncommitted["value"] == 2


async def test_any_endpoint_answers_every_key_from_the_task_that_owns_it(job: Job) -> None:
    for task in TASKS:
        job.commit(task, {w: i for w, i in counts(WORDS) if job.task_of(w) == task}, 3)
    for server in job.servers:
        for word, count in counts(WORDS):
            status, answer, _ = await fetch(f"{server.url}/v1/stores/counts/get", key=word)
            assert (status, answer["value"], answer["task"]) == (200, count,
                                                                 job.task_of(word))


async def test_a_key_without_a_value_is_found_false(job: Job) -> None:
    status, answer, _ = await fetch(f"{job.servers[1].url}/v1/stores/counts/get",
                                    key="never-seen")
    assert (status, answer["found"], answer["value"]) == (200, False, None)


async def test_owner_names_task_partition_worker_and_url(job: Job) -> None:
    for word in WORDS[:10]:
        _, owner, _ = await fetch(f"{job.servers[0].url}/v1/stores/counts/owner", key=word)
        worker = TASKS.index(job.task_of(word))
        assert owner == {"store": "counts", "key": word, "task": job.task_of(word),
                         "stream": "local.words",
                         "partition": partition_for_key(word.encode(), 4), "worker": worker,
                         "host": None, "url": job.servers[worker].url, "epoch": 1}


async def test_a_task_not_running_answers_503_with_retry_after(job: Job) -> None:
    word = next(w for w in WORDS if job.task_of(w) == "Partition 1")
    job.workers[1].instances.clear()  # restoring, or let go before a move
    for server in job.servers:
        status, answer, headers = await fetch(f"{server.url}/v1/stores/counts/get", key=word)
        assert (status, headers["Retry-After"], answer["retry_after_ms"]) == (503, "1", 1000)
        assert answer["error"] == ("task 'Partition 1' is restoring or moving on worker 1; "
                                   "retry after 1000 ms")


async def test_an_owner_whose_endpoint_is_gone_answers_503(job: Job) -> None:
    word = next(w for w in WORDS if job.task_of(w) == "Partition 1")
    await job.servers[1].close()
    status, answer, headers = await fetch(f"{job.servers[0].url}/v1/stores/counts/get",
                                          key=word)
    assert (status, headers["Retry-After"]) == (503, "1")
    assert "retry after 1000 ms" in answer["error"]


async def test_redirect_sends_the_client_to_the_owner(job: Job) -> None:
    word = next(w for w in WORDS if job.task_of(w) == "Partition 1")
    async with aiohttp.ClientSession() as session, session.get(
            f"{job.servers[0].url}/v1/stores/counts/get",
            params={"key": word, "redirect": "1"}, allow_redirects=False) as answer:
        assert answer.status == 307
        assert answer.headers["Location"].startswith(f"{job.servers[1].url}/v1/stores/")


async def test_a_store_not_keyed_like_an_input_is_refused_with_404(job: Job) -> None:
    status, answer, _ = await fetch(f"{job.servers[0].url}/v1/stores/unkeyed/get", key="a")
    assert status == 404
    assert answer["error"].startswith("store 'unkeyed' of job 'wc' does not declare how its "
                                      "keys are partitioned")


async def test_prefix_and_range_scans_merge_every_task_in_key_order(job: Job) -> None:
    for task in TASKS:
        job.commit(task, {w: i for w, i in counts(WORDS) if job.task_of(w) == task}, 3)
    expected = sorted(counts(WORDS))
    async with Client([job.servers[0].url]) as client:
        pages, after = [], None
        while True:
            page = await client.prefix("counts", "word-", limit=7, after=after)
            pages.append(page.entries)
            if page.next is None:
                break
            after = page.next
        assert [e for p in pages for e in p] == expected
        assert max(len(p) for p in pages) == 7
        ranged = await client.range("counts", "word-1", "word-2", limit=1000)
        assert ranged.entries == [(w, c) for w, c in expected if "word-1" <= w < "word-2"]
        assert ranged.next is None


async def test_the_client_answers_once_a_moving_task_runs_again(job: Job) -> None:
    word = next(w for w in WORDS if job.task_of(w) == "Partition 1")
    job.commit("Partition 1", {word: 5}, 9)
    running = list(job.workers[1].instances)
    job.workers[1].instances.clear()
    loop = asyncio.get_running_loop()
    loop.call_later(1.5, job.workers[1].instances.extend, running)
    async with Client(job.config, retry_for=120) as client:
        answer = await client.get("counts", word)
        assert (answer.found, answer.value, answer.position) == (True, 5, 9)
        assert client.retried >= 1


async def test_the_client_never_returns_an_answer_older_than_one_it_saw(job: Job) -> None:
    word = next(w for w in WORDS if job.task_of(w) == "Partition 0")
    job.commit("Partition 0", {word: 5}, 9)
    async with Client([job.servers[1].url], retry_for=1) as client:
        assert (await client.get("counts", word)).value == 5
        stale = TaskStore("counts", RocksDBEngine(job.config.root / "stale"),
                          get_serde("string"), get_serde("json"))
        stale.put(word, 4)
        stale.apply(stale.drain(), ChangelogPosition("wc-counts-changelog", 0, 8))
        job.workers[0].instances[0].stores["counts"] = stale  # a replaced owner's copy
        try:
            with pytest.raises(TaskUnavailableError):
                await client.get("counts", word)
            assert client.stale >= 1
        finally:
            stale.close()


async def test_the_client_reports_a_store_that_is_not_queryable(job: Job) -> None:
    async with Client(job.config) as client:
        with pytest.raises(NotQueryableError):
            await client.get("unkeyed", "a")


async def test_a_request_without_the_token_is_refused(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WC_QUERY_TOKEN", "s3cret")
    job = await start_job(tmp_path, {"token": '"${WC_QUERY_TOKEN}"'})
    try:
        url = f"{job.servers[0].url}/v1/stores/counts/get"
        status, answer, _ = await fetch(url, key="apple")
        assert status == 401 and "s3cret" not in str(answer)
        async with Client([job.servers[0].url], token="wrong") as client:
            with pytest.raises(QueryAuthError):
                await client.get("counts", "apple")
        async with Client(job.config) as client:  # the token from [queries]
            assert (await client.get("counts", "apple")).found is False
    finally:
        await stop(job)
