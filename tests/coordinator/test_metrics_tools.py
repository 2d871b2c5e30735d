"""The tools around the metrics: a real Prometheus server scraping a job, `status --watch`
in a pseudo-terminal, and the JSON logs of `sampan run --log-format json`."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from jobs.harness import CLI, REPO, blocked_writing_stdout
from jobs.outputs import keys
from jobs.runs import CountJob
from metricsjobs import endpoints

PROMETHEUS = shutil.which("prometheus")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def documented_scrape_config(targets: str) -> str:
    """docs/metrics.md's prometheus.yml, scraping every second, its file_sd glob pointed at
    ``targets``."""
    text = (REPO / "docs" / "metrics.md").read_text()
    block = text.split("```yaml\n# prometheus.yml\n", 1)[1].split("```", 1)[0]
    assert DOCUMENTED_GLOB in block
    return block.replace(DOCUMENTED_GLOB, targets).replace("scrape_interval: 15s",
                                                           "scrape_interval: 1s")


DOCUMENTED_GLOB = "/home/you/views/state/views/metrics/*.json"


@pytest.mark.skipif(PROMETHEUS is None, reason="the prometheus server binary is not installed "
                    "(Debian/Ubuntu: apt-get install prometheus)")
async def test_a_prometheus_server_scrapes_the_job(make_job: Callable[..., CountJob],
                                                   tmp_path: Path) -> None:
    """docs/metrics.md's scrape config (file_sd on the job's state folder) finds every
    endpoint, and still does after a worker's SIGKILL and an expansion."""
    job = make_job("scraped", {"words": 2}, workers=1)
    await job.create("words", 2)
    await job.produce("words", keys(10), 3)
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    config = tmp_path / "prometheus.yml"
    config.write_text(documented_scrape_config(
        str(job.config.state_dir / "metrics" / "*.json")))
    port = free_port()
    assert PROMETHEUS is not None
    server = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def ask(query: str) -> list[dict]:
            encoded = urllib.parse.urlencode({"query": query})
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/query?{encoded}",
                                        timeout=2) as response:
                return json.load(response)["data"]["result"]  # type: ignore[no-any-return]

        async def scraped(epoch: int, processed_at_least: int) -> bool:
            coordinator, workers = await endpoints(job)
            targets = [urllib.parse.urlsplit(u).netloc for u in (coordinator, *workers.values())]
            try:
                up = ask("up")
                processed = ask("sum(sampan_records_processed_total)")
                epochs = ask('sampan_job_model_epoch{process="worker-0"}')
            except OSError:
                return False
            return (sorted((r["metric"]["instance"], r["value"][1]) for r in up)
                    == sorted((t, "1") for t in targets)
                    and [r["value"][1] for r in epochs] == [str(epoch)]
                    and len(processed) == 1
                    and float(processed[0]["value"][1]) >= processed_at_least)
        await job.wait(lambda: scraped(1, 30), f"prometheus on port {port} to scrape every "
                       f"endpoint and report {job.truth.total} records processed", timeout=60)
        assert [r["value"][1] for r in ask('sampan_job_model_epoch{process="coordinator"}')
                ] == ["1"]
        dashboard = json.loads((REPO / "docs" / "grafana-dashboard.json").read_text())
        queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]] + [
            a["expr"] for a in dashboard["annotations"]["list"]]
        for query in queries:  # every dashboard query is valid PromQL (else HTTP 400)
            ask(query.replace("$job", "scraped"))

        os.kill((await job.state()).status.worker_pids[0], signal.SIGKILL)
        await job.expand("words", 4)
        await job.wait_epoch(2)
        await job.produce("words", keys(10), 1)
        await job.wait_outputs()
        await job.wait(lambda: scraped(2, 10), "prometheus to scrape the restarted worker "
                       "at epoch 2, counting what it processed since", timeout=60)
    finally:
        server.terminate()
        server.wait(30)
    assert await job.stop() == 0


def read_until(fd: int, marker: bytes, timeout: float = 30) -> bytes:
    """Read the pseudo-terminal until ``marker`` shows (or fail with what was read)."""
    seen = b""
    deadline = time.monotonic() + timeout
    while marker not in seen:
        if time.monotonic() > deadline:
            raise AssertionError(f"no {marker!r} within {timeout:g}s; read {seen[-2000:]!r}")
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
    return seen


async def test_status_watch_draws_frames_in_a_terminal_until_ctrl_c(
        make_job: Callable[..., CountJob]) -> None:
    """Frames redrawn in place in a terminal; once nothing reads the terminal any more, it
    fills and the watch blocks writing: Ctrl-C still ends it (exit 0), giving up the
    final frame it cannot write."""
    job = make_job("watched", {"words": 2}, workers=1, extra='')
    await job.create("words", 2)
    await job.produce("words", keys(10), 2)
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    main, child = pty.openpty()
    watch = subprocess.Popen([*CLI, "status", str(job.path), "--watch", "--interval", "0.2"],
                             stdin=child, stdout=child, stderr=child, cwd=REPO,
                             env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "120",
                                  "TERM": "xterm"})
    os.close(child)
    try:
        screen = read_until(main, b"Ctrl-C to stop")
        screen += read_until(main, b"Ctrl-C to stop")  # a second frame, redrawn in place

        async def blocked() -> bool:
            return blocked_writing_stdout(watch)
        await job.wait(blocked, "status --watch to block on the full terminal", timeout=120)
        watch.send_signal(signal.SIGINT)
        assert watch.wait(30) == 0
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
        os.close(main)
    text = screen.decode(errors="replace")
    assert "job watched: epoch 1, 1 worker, coordinator running, total lag 0" in text
    assert "health: healthy" in text
    assert "Partition 0" in text and "Partition 1" in text and "local.words 0" in text
    assert "\x1b[" in text  # drawn with cursor movements, in place
    assert await job.stop() == 0


async def test_json_logs_carry_job_process_and_epoch(make_job: Callable[..., CountJob]) -> None:
    job = make_job("logged", {"words": 2}, workers=1)
    await job.create("words", 2)
    await job.produce("words", keys(5), 2)
    job._log = open(job.folder / "coordinator.log", "ab")  # noqa: SIM115
    job.process = subprocess.Popen(
        [*CLI, "run", str(job.path), "--worker-logs", str(job.logs), "--log-format", "json"],
        stdout=job._log, stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    await job.wait_epoch(1)
    await job.wait_outputs()
    assert await job.stop() == 0
    coordinator = [json.loads(line) for line in job.coordinator_log().splitlines()]
    published = next(e for e in coordinator if "published job model" in e["message"])
    assert {k: published[k] for k in ("level", "job", "process")} == {
        "level": "INFO", "job": "logged", "process": "coordinator"}
    worker = [json.loads(line) for line in (job.logs / "worker-0.log").read_text().splitlines()]
    stopped = next(e for e in worker if "worker 0 stopped" in e["message"])
    assert {k: stopped[k] for k in ("job", "process", "worker", "epoch")} == {
        "job": "logged", "process": "worker-0", "worker": 0, "epoch": 1}
