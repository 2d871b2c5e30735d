"""`sampan streams list` and `streams delete` on real Apache Kafka: a job's own topics
(coordinator stream, checkpoints, fences, changelog) are hidden as on the local log unless
``--all`` marks them, and a delete is a DeleteTopics the broker carries out."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from polling import poll

from framework.config import load_config
from framework.systems import open_system
from framework.systems.base import Checkpoint, CommitRequest, ProducerRecord
from framework.systems.kafka.system import KafkaSystem
from groupers import SystemStreamPartition as SSP

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def _job(folder: Path, bootstrap: str) -> Path:
    """Job ``j`` (the count task, one worker) in a namespace of its own on the shared
    broker."""
    folder.mkdir()
    shutil.copy(HERE / "count_task.py", folder / "count_task.py")
    path = folder / "job.toml"
    path.write_text(f"""\
[job]
name = "j"
task = "count_task:CountTask"
inputs = ["kafka.words"]
commit_interval_ms = 200

[coordinator]
monitor_interval_ms = 500

[systems.kafka]
type = "kafka"
bootstrap = "{bootstrap}"
client_options = {{namespace = "cli-{uuid.uuid4().hex[:8]}."}}

[streams."kafka.words"]
partitions = 2

[stores.counts]
""")
    return path


def _sampan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "framework.cli", *args], capture_output=True,
                          text=True, timeout=120, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


async def test_list_marks_a_jobs_topics_and_delete_removes_topics(
        kafka_broker: Any, tmp_path: Path) -> None:
    path = _job(tmp_path / "job", kafka_broker.bootstrap)
    system = open_system(load_config(path).system("kafka"))
    assert isinstance(system, KafkaSystem)
    await system.start()
    try:
        await system.create_stream("words", 2)
        await system.produce([ProducerRecord("words", k, b"{}") for k in (b"a", b"b", b"c")])
        await system.create_stream("__sampan-j-coordinator", 1, compacted=True)
        await system.create_stream("j-counts-changelog", 1, compacted=True)
        await system.fence("j", 1)
        await system.commit(CommitRequest("j", 1, (), [Checkpoint("Partition 0", 1, {
            SSP("kafka", "words", 0): 1})]))

        listed = _sampan("streams", "list", str(path))
        assert listed.returncode == 0, listed.stderr
        assert [line.split("\t")[0] for line in listed.stdout.splitlines()] == [
            "STREAM", "kafka.words"]
        assert listed.stderr.startswith("(4 internal streams of sampan not shown: ")
        every = _sampan("streams", "list", str(path), "--all")
        assert every.returncode == 0, every.stderr
        rows = {line.split("\t")[0]: line.split("\t") for line in every.stdout.splitlines()}
        assert {name: row[-1] for name, row in rows.items()} == {
            "STREAM": "INTERNAL",
            "kafka.__sampan-j-checkpoints": "checkpoints of job 'j'",
            "kafka.__sampan-j-coordinator": "coordinator stream of job 'j'",
            "kafka.__sampan-j-fences": "fences of job 'j'",
            "kafka.j-counts-changelog": "changelog of store 'counts' of job 'j'",
            "kafka.words": "-",
        }
        assert rows["kafka.words"][1] == "2"

        done = _sampan("streams", "delete", "kafka.words", str(path), "--yes")
        assert (done.returncode, done.stdout, done.stderr) == (
            0, "deleted kafka.words (2 partitions, 3 records). Job 'j' reads it: after you "
            "create it again, run `sampan streams reset-offsets kafka.words --job "
            f"{path} --to earliest` before `sampan run` (its checkpoints still point into "
            "the deleted stream)\n", "")
        fences = _sampan("streams", "delete", "kafka.__sampan-j-fences", str(path), "--yes")
        assert (fences.returncode, fences.stdout) == (
            0, "deleted kafka.__sampan-j-fences (1 partition, 1 record; fences of job 'j')\n")
        assert "words" not in await system.list_streams()
        assert set(await system.hidden_streams()) == {"__sampan-j-checkpoints"}
        again = _sampan("streams", "delete", "kafka.words", str(path), "--yes")
        assert again.returncode == 2
        assert again.stderr.startswith("sampan streams: error: stream kafka.words does not "
                                       "exist; create it with ")
    finally:
        await system.close()


def test_delete_is_refused_while_the_job_runs_on_kafka(kafka_broker: Any,
                                                        tmp_path: Path) -> None:
    """A running job on Kafka (its coordinator a live member of its lease group) keeps its
    input: the refusal names the job, its coordinator and how to stop it."""
    path = _job(tmp_path / "job", kafka_broker.bootstrap)
    created = _sampan("streams", "create", "kafka.words", "--partitions", "2", str(path))
    assert created.returncode == 0, created.stderr
    with (tmp_path / "run.log").open("ab") as log:
        process = subprocess.Popen([sys.executable, "-m", "framework.cli", "run", str(path)],
                                   stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                                   start_new_session=True,
                                   env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline, started = time.monotonic() + 120, time.monotonic()
        while _sampan("status", str(path)).returncode != 0:
            assert process.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the job never became healthy"
            poll(started)
        host = json.loads(_sampan("status", str(path), "--json").stdout)["coordinator_host"]
        refused = _sampan("streams", "delete", "kafka.words", str(path), "--yes")
        assert (refused.returncode, refused.stdout, refused.stderr) == (
            2, "", f"sampan streams: error: refused: job 'j' is running (coordinator pid "
            f"{process.pid} on {host}) and reads kafka.words; stop it (Ctrl-C on `sampan run "
            f"{path}`), then delete again\n")
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)
    done = _sampan("streams", "delete", "kafka.words", str(path), "--yes")
    # The job holds positions on its input since its first model: deleting it says what
    # to do before the job runs again.
    assert (done.returncode, done.stdout) == (0, (
        "deleted kafka.words (2 partitions, 0 records). Job 'j' reads it: after you create "
        f"it again, run `sampan streams reset-offsets kafka.words --job {path} --to "
        "earliest` before `sampan run` (its checkpoints still point into the deleted "
        "stream)\n")), done.stderr
