"""`sampan status` tells the truth in words and in its exit status: 0 only for a running,
healthy job; 1 degraded, 3 not running, 4 failed — the same with and without --json."""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from typing import Any

from jobs.harness import CLI, REPO, blocked_writing_stdout
from jobs.outputs import keys
from jobs.runs import CountJob

from framework.config import load_config


def status(job: CountJob) -> tuple[int, str, dict[str, Any]]:
    """(exit status, text, --json document); both forms must exit alike."""
    text = job.sampan("status", "{job}")
    document = job.sampan("status", "{job}", "--json")
    assert text.returncode == document.returncode, (text.stdout, document.stdout)
    return text.returncode, text.stdout, json.loads(document.stdout)


def tune(job: CountJob, **coordinator: int) -> None:
    """Set ``[coordinator]`` keys of the job file (before `start`)."""
    text = job.path.read_text()
    for key, value in coordinator.items():
        text = re.sub(rf"(?m)^{key} = .*\n", "", text)
        text = text.replace("[coordinator]\n", f"[coordinator]\n{key} = {value}\n", 1)
    job.path.write_text(text)
    job.config = load_config(job.path)


async def test_a_healthy_job_exits_0_and_a_stopped_one_3(make_job: Callable[..., CountJob]) -> None:
    job = make_job("healthy", {"words": 2})
    await job.create("words", 2)
    await job.produce("words", keys(10), 2)
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    code, text, document = status(job)
    assert code == 0, text
    assert (document["state"], document["health"], document["problems"]) == (
        "running", "healthy", [])
    assert "coordinator running, total lag 0\n  health: healthy (exit status 0)\n" in text
    assert await job.stop() == 0
    code, text, document = status(job)
    assert (code, document["state"], document["health"]) == (3, "stopped", "not running")
    assert "  health: not running (exit status 3)\n    the job was stopped at " in text


async def test_sigkill_of_sampan_run_is_not_running(make_job: Callable[..., CountJob]) -> None:
    """`kill -9` of the coordinator alone: its last report still says running, but its
    process is gone, so status says not running (exit 3), not running/0."""
    job = make_job("killed", {"words": 2})
    await job.create("words", 2)
    process = job.start()
    await job.wait_epoch(1)
    assert status(job)[0] == 0
    os.kill(process.pid, signal.SIGKILL)
    process.wait(30)
    assert (await job.state()).status.state == "running"  # what the stream still says
    code, text, document = status(job)
    assert (code, document["state"], document["health"]) == (3, "died", "not running")
    detail = (f"its coordinator (pid {process.pid} on {document['coordinator_host']}) is "
              f"gone: it was killed or crashed without reporting")
    assert document["problems"][0].startswith(detail)
    assert f"  NOT RUNNING: {detail}" in text


async def test_a_coordinator_that_stops_renewing_its_lease_is_not_running(
        make_job: Callable[..., CountJob]) -> None:
    """SIGSTOP: the process lives but its lease expires; status says so (exit 3), and
    running again once SIGCONT lets it renew."""
    job = make_job("frozen", {"words": 2}, workers=1)
    tune(job, lease_timeout_ms=1000)
    await job.create("words", 2)
    process = job.start()
    await job.wait_epoch(1)
    os.kill(process.pid, signal.SIGSTOP)
    try:
        time.sleep(1.5)  # past the lease's expiry: nothing renews it while stopped
        code, _, document = status(job)
        assert (code, document["state"]) == (3, "died")
        assert "the job's lease expired at " in document["problems"][0]
        assert f"its coordinator (pid {process.pid} on " in document["problems"][0]
    finally:
        os.kill(process.pid, signal.SIGCONT)

    async def renewed() -> bool:
        return bool(job.sampan("status", "{job}").returncode == 0)
    await job.wait(renewed, "status healthy again once the coordinator renews its lease")
    assert await job.stop() == 0


async def test_a_crash_loop_is_degraded_while_it_happens_then_failed(
        make_job: Callable[..., CountJob]) -> None:
    """A task that raises on every record: from the second crash status is degraded
    (exit 1) with the crashes in the window and the last error line; once the
    coordinator gave up, failed (exit 4)."""
    job = make_job("looping", {"words": 2}, task="BoomTask", workers=1, max_restarts=3)
    tune(job, worker_restart_backoff_ms=1500)
    await job.create("words", 2)
    await job.produce("words", keys(4), 1)
    process = job.start()

    async def looping() -> bool:
        crashes = (await job.state()).status.crashes
        return bool(crashes) and len(crashes[0].exits_ms) >= 2
    await job.wait(looping, "two crashes of worker 0")
    code, text, document = status(job)
    if code == 4:  # gave up already (a very slow machine): the end state is checked below
        assert document["state"] == "failed"
    else:
        assert (code, document["state"], document["health"]) == (1, "running", "degraded")
        problem = document["problems"][0]
        assert problem.startswith("worker 0 is ") and " crashes in the last 10 min" in problem
        assert ", the job stops after 3" in problem
        assert "RuntimeError: boom on k00" in problem  # the last error line of its log
        assert "  health: degraded (exit status 1)\n    worker 0 is " in text

    async def exited() -> bool:
        return process.poll() is not None
    job.process = None
    await job.wait(exited, "sampan run to give up")
    job.process = process
    code, text, document = status(job)
    assert (code, document["state"], document["health"]) == (4, "failed", "failed")
    assert document["problems"] == [document["error"]]
    assert document["error"].startswith("worker 0 exited 4 times within 10 min (last status 2)")
    assert f"  FAILED: {document['error']}" in text


async def test_a_sigkilled_worker_is_named_and_down_until_its_restart(
        make_job: Callable[..., CountJob]) -> None:
    """A SIGKILLed worker waiting out a long restart backoff: the log says `killed by
    SIGKILL`, status is degraded with the worker down; Ctrl-C does not wait the backoff."""
    job = make_job("downed", {"words": 2}, workers=1)
    tune(job, worker_restart_backoff_ms=30000)
    await job.create("words", 2)
    job.start()
    state = await job.wait_epoch(1)
    os.kill(state.status.worker_pids[0], signal.SIGKILL)

    async def down() -> bool:
        crashes = (await job.state()).status.crashes
        return bool(crashes) and crashes[0].restart_ms is not None
    await job.wait(down, "worker 0 reported down")
    code, _, document = status(job)
    assert (code, document["health"]) == (1, "degraded")
    assert document["problems"][0].startswith("worker 0 is down (last killed by SIGKILL at ")
    assert "worker 0 killed by SIGKILL (log: " in job.coordinator_log()
    assert await job.stop() == 0
    assert job.coordinator_log().count("started worker 0 ") == 1  # stopped in the backoff


async def test_a_refused_partition_change_is_degraded(make_job: Callable[..., CountJob]) -> None:
    job = make_job("refusing", {"words": 2})
    await job.create("words", 2)
    job.start()
    await job.wait_epoch(1)
    await job.expand("words", 3)

    async def refused() -> bool:
        return (await job.state()).status.refusal is not None
    await job.wait(refused, "the refusal of 2→3")
    code, text, document = status(job)
    assert (code, document["health"]) == (1, "degraded")
    assert document["problems"] == ["partition change local.words 2→3 refused: records "
                                    "written since wait until it is resolved"]
    assert "  REFUSED local.words 2→3: " in text
    # the count the job reads, next to the stream's own
    assert (document["partition_counts"], document["stream_partition_counts"],
            document["held_inputs"]) == ({"local.words": 2}, {"local.words": 3}, ["local.words"])
    assert ("  input local.words: reads 2 of its 3 partitions (held: read only up to where "
            "it had 2)\n") in text
    assert await job.stop() == 0


async def test_status_lists_the_metrics_urls_of_live_processes_only(
        make_job: Callable[..., CountJob]) -> None:
    """A SIGKILLed worker waiting out its restart backoff has no URL; a stopped job none."""
    job = make_job("endpoints", {"words": 2})
    tune(job, worker_restart_backoff_ms=30000)
    await job.create("words", 2)
    job.start()
    state = await job.wait_epoch(1)
    ports = {w: p.metrics_port for w, p in state.progress.items()}
    metrics = status(job)[2]["metrics"]
    assert metrics["coordinator"] == f"http://127.0.0.1:{state.status.metrics_port}/metrics"
    assert metrics["workers"] == {str(w): f"http://127.0.0.1:{p}/metrics"
                                  for w, p in sorted(ports.items())}
    os.kill(state.status.worker_pids[0], signal.SIGKILL)

    async def down() -> bool:
        crashes = (await job.state()).status.crashes
        return bool(crashes) and crashes[0].restart_ms is not None
    await job.wait(down, "worker 0 reported down")
    code, text, document = status(job)
    assert code == 1
    assert document["metrics"]["workers"] == {"1": f"http://127.0.0.1:{ports[1]}/metrics"}
    assert f", worker 1 http://127.0.0.1:{ports[1]}/metrics (Prometheus" in text
    assert f":{ports[0]}/" not in text
    assert await job.stop() == 0
    code, text, document = status(job)
    assert code == 3
    assert (document["metrics"]["coordinator"], document["metrics"]["workers"]) == (None, {})
    assert "  metrics:" not in text


async def test_status_watch_writes_frames_into_a_pipe(
        make_job: Callable[..., CountJob]) -> None:
    """Text frames into a pipe; once the reader stops reading, the pipe fills and the watch
    blocks writing: Ctrl-C still ends it (exit 0) instead of leaving it blocked."""
    job = make_job("piped", {"words": 2}, workers=1)
    await job.create("words", 2)
    job.start()
    await job.wait_epoch(1)
    watch = subprocess.Popen([*CLI, "status", "--job", str(job.path), "--watch",
                              "--interval", "0.2"], stdout=subprocess.PIPE, cwd=REPO,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert watch.stdout is not None
        fcntl.fcntl(watch.stdout, fcntl.F_SETPIPE_SZ, 4096)  # a few frames fill it
        frames = 0
        seen = []
        while frames < 2:
            line = watch.stdout.readline().decode()
            assert line, f"--watch ended early: {''.join(seen)}"
            seen.append(line)
            frames += line.startswith("  health: healthy (exit status 0)")

        async def blocked() -> bool:
            return blocked_writing_stdout(watch)
        await job.wait(blocked, "status --watch to block on its full pipe", timeout=120)
        watch.send_signal(signal.SIGINT)
        assert watch.wait(30) == 0
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
    text = "".join(seen)
    assert text.startswith("--- ") and "\njob piped: epoch 1 (coordinator start), 1 worker, " \
        "coordinator running, total lag 0\n" in text
    assert await job.stop() == 0


async def test_more_workers_than_tasks_says_which_are_idle(
        make_job: Callable[..., CountJob]) -> None:
    """workers = 3 for 2 partitions: the start log and status name worker 2 as idle."""
    job = make_job("wasteful", {"words": 2}, workers=3)
    await job.create("words", 2)
    job.start()
    await job.wait_epoch(1)
    message = ("2 tasks on 3 workers: worker 2 has none; the task count is fixed by the "
               "input partitions at the job's first start, so set job.workers to at most 2")
    assert f"WARNING {message}" in job.coordinator_log()
    code, text, document = status(job)
    assert code == 0  # a waste, not a fault
    assert document["idle_workers"] == [2]
    assert f"  IDLE WORKERS: {message}\n" in text
    assert await job.stop() == 0
