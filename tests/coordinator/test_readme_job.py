"""README's "A job in two files", run as a newcomer would: its own files, its own commands.

The files are taken from README.md itself, so the README cannot drift from what works.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from jobs.harness import CLI, REPO

README = REPO / "README.md"


def readme_block(marker: str) -> str:
    """The fenced code block of README.md whose first line is ``marker``."""
    for block in re.findall(r"```\w*\n(.*?)```", README.read_text(), flags=re.S):
        if block.startswith(marker + "\n"):
            return block
    raise AssertionError(f"README.md has no code block starting with {marker!r}")


def sampan(folder: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], input=stdin, capture_output=True, text=True,
                          timeout=120, cwd=folder, env={**os.environ, "PYTHONPATH": str(REPO)})


async def wait(condition: object, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


def totals(folder: Path) -> dict[str, int]:
    tail = sampan(folder, "streams", "tail", "local.totals", "--job", "counter.toml",
                  "--from-beginning", "--until-end", "--json")
    if tail.returncode == 2 and "stream local.totals does not exist" in tail.stderr:
        return {}  # `sampan run` has not created its output stream yet
    assert tail.returncode == 0, tail.stderr
    return {row["key"]: row["value"] for row in map(json.loads, tail.stdout.splitlines())}


async def test_a_bad_record_stops_the_readme_job_with_status_naming_the_worker_log(
        tmp_path: Path) -> None:
    """A typo'd record: refused by `produce`; a wrong field makes `process` raise, the job
    stops and `status` names the error and the worker log that holds the traceback; with
    ``process_policy = "skip"`` the job moves past it, exactly."""
    (tmp_path / "counter_task.py").write_text(readme_block("# counter_task.py"))
    job = readme_block("# counter.toml")
    # Only to keep the test short: give up after 1 restart, 100 ms apart (README: 5, 500 ms).
    fast = "\n[coordinator]\nmax_worker_restarts = 1\nworker_restart_backoff_ms = 100\n"
    (tmp_path / "counter.toml").write_text(job + fast)
    with (tmp_path / "run.log").open("ab") as out:
        run = subprocess.Popen([*CLI, "run", "counter.toml"], stdout=out, stderr=out,
                               cwd=tmp_path, start_new_session=True,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        produce = ("streams", "produce", "local.events", "--job", "counter.toml")
        good = sampan(tmp_path, *produce, stdin='{"key": "a", "value": {"amount": 5}}\n')
        assert good.returncode == 0
        # `produce` creates local.events itself when `sampan run` has not yet.
        assert good.stderr.endswith("produced 1 record to local.events\n"), good.stderr
        await wait(lambda: totals(tmp_path) == {"a": 5}, "a = 5")

        typo = sampan(tmp_path, *produce, stdin='{"key":"m","val":{"amount":1}}\n')
        assert (typo.returncode, typo.stderr) == (2, (
            "sampan streams: error: stdin line 1: no \"value\" field (found ['key', 'val']); "
            'write {"key": "k", "value": {...}}, or "value": null for a tombstone (a delete)\n'))

        wrong = sampan(tmp_path, *produce, stdin='{"key": "m", "value": {"amt": 1}}\n')
        assert wrong.returncode == 0
        await wait(lambda: run.poll() is not None, "sampan run to stop on the failing record")
        assert run.returncode == 2
        status = sampan(tmp_path, "status", "counter.toml")
        failed = next(line for line in status.stdout.splitlines() if "FAILED" in line)
        found = re.fullmatch(
            r"  FAILED: worker (\d) exited 2 times within 10 min \(last status 2\): task "
            r"'Partition (\d)' failed on local\.events\[\2\] offset \d+: KeyError: 'amount' "
            r"\(counter_task\.py:9 in process\); fix the task and restart .*; the worker's log "
            r"is (\S+); fix the cause and run again", failed)
        assert found is not None, status.stdout
        log = Path(found[3])
        assert log == tmp_path / "state" / "counter" / "logs" / f"worker-{found[1]}.log"
        text = log.read_text()
        assert "Traceback (most recent call last)" in text
        assert "KeyError: 'amount'" in text
        assert f"worker logs: {tmp_path / 'state' / 'counter' / 'logs'}/worker-N.log" in (
            status.stdout)

        (tmp_path / "counter.toml").write_text(
            job + fast + '\n[errors]\nprocess_policy = "skip"\n')
        with (tmp_path / "run.log").open("ab") as out:
            run = subprocess.Popen([*CLI, "run", "counter.toml"], stdout=out, stderr=out,
                                   cwd=tmp_path, start_new_session=True,
                                   env={**os.environ, "PYTHONPATH": str(REPO)})
        more = sampan(tmp_path, *produce, stdin='{"key": "m", "value": {"amount": 2}}\n'
                                                '{"key": "a", "value": {"amount": 1}}\n')
        assert (more.returncode, more.stderr) == (0, "produced 2 records to local.events\n")
        await wait(lambda: totals(tmp_path) == {"a": 6, "m": 2}, "a = 6 and m = 2")
        run.send_signal(signal.SIGINT)
        assert run.wait(60) == 0
        assert "skipped local.events" in (tmp_path / "run.log").read_text()
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(30)
