"""`sampan status` lists each live query endpoint (text and --json): two real endpoints
publishing in a real local log, their workers' progress reports beside them."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from queryjobs import Job, start_job, stop

from framework.commands.status import collect_status
from framework.commands.status_text import print_status
from framework.metadata import QueryEndpoint, WorkerProgress
from framework.metadata.stream import publish_query_endpoint, publish_worker_progress


@pytest.fixture
async def job(tmp_path: Path) -> AsyncIterator[Job]:
    started = await start_job(tmp_path)
    now = int(time.time() * 1000)
    for worker in (0, 1):  # both endpoints' workers are this process
        await publish_worker_progress(started.system, started.config, worker,
                                      WorkerProgress(1, os.getpid(), now, now))
    yield started
    await stop(started)


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def text_of(job: Job, status: object) -> str:
    out = io.StringIO()
    print_status(status, out)  # type: ignore[arg-type]
    return out.getvalue()


async def test_status_lists_each_workers_query_endpoint(job: Job) -> None:
    status = await collect_status(job.config)
    urls = [job.servers[0].url, job.servers[1].url]
    assert status.to_json()["queries"] == {"0": urls[0], "1": urls[1]}
    assert f"\n  queries: worker 0 {urls[0]}, worker 1 {urls[1]}\n" in text_of(job, status)


async def test_status_leaves_out_a_closed_endpoint(job: Job) -> None:
    await job.servers[1].close()
    status = await collect_status(job.config)
    assert status.to_json()["queries"] == {"0": job.servers[0].url}


async def test_status_leaves_out_the_endpoint_of_a_dead_worker(job: Job) -> None:
    pid, now = dead_pid(), int(time.time() * 1000)
    await publish_worker_progress(job.system, job.config, 1, WorkerProgress(1, pid, now, now))
    await publish_query_endpoint(job.system, job.config, 1,
                                 QueryEndpoint(1, pid, now, "http://127.0.0.1:9"))
    status = await collect_status(job.config)
    assert status.to_json()["queries"] == {"0": job.servers[0].url}


async def test_status_leaves_out_an_endpoint_its_worker_did_not_publish(job: Job) -> None:
    """A restarted worker reports progress before it listens: its predecessor's URL, still
    in the stream, is not shown."""
    now = int(time.time() * 1000)
    await publish_query_endpoint(job.system, job.config, 1,
                                 QueryEndpoint(1, dead_pid(), now, "http://127.0.0.1:9"))
    status = await collect_status(job.config)
    assert status.to_json()["queries"] == {"0": job.servers[0].url}
