"""One `sampan run` per state folder on a machine: a second run of the job on the same
folder (one-host or `--host`) exits 2 naming the folder, the running one's pid and what to
do; the lock dies with its holder."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hostjobs import job_file, wait_for
from jobs.harness import CLI
from kafka_broker import free_port
from test_host_cli import _local_job


@contextlib.contextmanager
def _running(path: Path, *extra: str) -> Iterator[subprocess.Popen[bytes]]:
    """`sampan run path extra...` in its own process group, stopped (group killed) after."""
    process = subprocess.Popen([*CLI, "run", str(path), *extra], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
        with contextlib.suppress(ProcessLookupError):  # workers left behind, if any
            os.killpg(process.pid, signal.SIGKILL)


def _holds(lock: Path, pid: int, name: str = "-") -> bool:
    return lock.exists() and lock.read_text().split() == [str(pid), name]


def _second(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "run", str(path), *extra], capture_output=True, text=True,
                          timeout=60)


def test_second_one_host_run_on_a_local_job_exits_2_and_a_dead_run_leaves_no_lock(
        tmp_path: Path) -> None:
    path = _local_job(tmp_path)
    folder = tmp_path / "state" / "local-sums"
    with _running(path) as first:
        wait_for(lambda: _holds(folder / "host.lock", first.pid), 60, "the first run")
        done = _second(path)
        assert done.returncode == 2
        assert f"state folder {folder} (sampan run, pid {first.pid})" in done.stderr
        assert "stop that one first" in done.stderr and f"kill {first.pid}" in done.stderr
        assert first.poll() is None  # the first one runs on
        os.killpg(first.pid, signal.SIGKILL)  # the whole run dies: the kernel drops its lock
        first.wait(30)
    with _running(path) as third:
        wait_for(lambda: _holds(folder / "host.lock", third.pid), 60, "a run after the crash")
        third.send_signal(signal.SIGTERM)
        assert third.wait(60) == 0


def test_host_on_the_state_folder_of_a_one_host_kafka_run_exits_2(kafka_broker: Any,
                                                                   tmp_path: Path) -> None:
    path = job_file(tmp_path / "job", kafka_broker.bootstrap, f"lock-{os.getpid()}")
    name = f"lock-{os.getpid()}"
    data = path.parent / "state"  # the job file's default data_dir
    with _running(path) as plain:
        wait_for(lambda: _holds(data / name / "host.lock", plain.pid), 60, "the one-host run")
        done = _second(path, "--host", "a", "--data-dir", str(data))
        assert done.returncode == 2
        assert (f"state folder {data / name} of job {name!r} is in use by a one-host sampan "
                f"run (pid {plain.pid})") in done.stderr
        assert f"kill {plain.pid}" in done.stderr and "its own --data-dir" in done.stderr
        assert plain.poll() is None


def test_second_host_on_one_machine_with_a_fixed_metrics_port_exits_2(kafka_broker: Any,
                                                                      tmp_path: Path) -> None:
    name = f"port-{os.getpid()}"
    path = job_file(tmp_path / "job", kafka_broker.bootstrap, name)
    port = free_port()
    path.write_text(path.read_text() + f"\n[metrics]\nport = {port}\n")
    with _running(path, "--host", "a", "--data-dir", str(tmp_path / "a")) as first:
        wait_for(lambda: _holds(tmp_path / "a" / name / "host.lock", first.pid, "a"), 60,
                 "host a")
        done = _second(path, "--host", "b", "--data-dir", str(tmp_path / "b"))
        assert done.returncode == 2
        assert f"[metrics] port = {port}: host 'b' of job {name!r} cannot hold port {port}" \
            in done.stderr
        assert "set [metrics] port = 0" in done.stderr and "its own machine" in done.stderr
        assert first.poll() is None
