"""The pinned CLI: `--help` everywhere, errors on stderr with a one-line cause and fix."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable

import pytest
from jobs.harness import CLI, REPO
from jobs.outputs import keys
from jobs.runs import CountJob

from framework.systems.base import ProducerRecord

PINNED = [
    ["run"], ["status"], ["streams"], ["streams", "create"], ["streams", "expand"],
    ["streams", "list"], ["streams", "produce"], ["streams", "tail"], ["drill"],
]


@pytest.mark.parametrize("command", PINNED, ids=" ".join)
def test_every_pinned_command_has_help(command: list[str]) -> None:
    done = subprocess.run([*CLI, *command, "--help"], capture_output=True, text=True,
                          timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: sampan {' '.join(command)}")
    assert done.stderr == ""


def test_streams_help_says_what_tail_prints() -> None:
    done = subprocess.run([*CLI, "streams", "--help"], capture_output=True, text=True,
                          timeout=60, cwd=REPO)
    assert "tail         print records: partition, offset, key, value (tab-separated," \
        in done.stdout
    assert "print records as JSON lines" not in done.stdout


def one_line_error(done: subprocess.CompletedProcess[str], command: str) -> str:
    """The command failed with exit 2, nothing on stdout, one error line on stderr."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"sampan {command}: error: ")
    return lines[0].removeprefix(f"sampan {command}: error: ")


def test_status_of_a_job_never_run_is_not_running(make_job: Callable[..., CountJob]) -> None:
    """Exit 3 (not running) with and without --json, naming what to run."""
    job = make_job("never", {"words": 2})
    message = (f"job 'never' has not been started: no job model in "
               f"local.__sampan-never-coordinator; run `sampan run {job.path}`")
    text = job.sampan("status", "{job}")
    assert (text.returncode, text.stdout, text.stderr) == (3, message + "\n", "")
    document = job.sampan("status", "--json", "--job", "{job}")
    assert document.returncode == 3, document.stderr
    assert {k: v for k, v in json.loads(document.stdout).items() if k != "recorded_state"} == {
        "job": "never", "state": "not started", "health": "not running",
        "not_running": message, "problems": [message], "exit_status": 3}


def test_status_of_a_job_never_run_creates_nothing(make_job: Callable[..., CountJob]) -> None:
    """A status only reads: no local log, no folder appears where the job never ran."""
    job = make_job("untouched", {"words": 2})
    before = sorted(job.folder.rglob("*"))
    assert job.sampan("status", "{job}").returncode == 3
    assert job.sampan("status", "{job}", "--json").returncode == 3
    assert sorted(job.folder.rglob("*")) == before
    assert not (job.folder / "data").exists()


def test_stream_command_errors_name_cause_and_fix(make_job: Callable[..., CountJob]) -> None:
    job = make_job("clierr", {"words": 2})
    assert job.sampan("streams", "create", "local.words", "--partitions", "2",
                      "--job", "{job}").stdout == "created local.words with 2 partitions\n"
    assert job.sampan("streams", "create", "local.one", "{job}", "--partitions", "1"
                      ).stdout == "created local.one with 1 partition\n"  # JOB positional
    cases = {
        ("streams", "create", "local.words", "--partitions", "2", "--job", "{job}"):
            f"stream local.words already exists with 2 partitions; grow it with `sampan "
            f"streams expand local.words --partitions N --job {job.path}`",
        ("streams", "expand", "local.words", "--partitions", "1", "--job", "{job}"):
            "cannot shrink local.words from 2 to 1 partitions: partition counts only grow; "
            "pass --partitions N with N > 2",
        ("streams", "tail", "local.counts", "--job", "{job}", "--from-beginning",
         "--until-end", "--json"):
            f"stream local.counts does not exist; create it with `sampan streams create "
            f"local.counts --partitions N --job {job.path}`",
        ("streams", "tail", "local.nope", "--job", "{job}"):
            f'stream "local.nope" is not declared in {job.path}; add a [streams."local.nope"] '
            f"table (declared: local.counts, local.words)",
        ("streams", "create", "words", "--partitions", "2", "--job", "{job}"):
            "'words': expected SYSTEM.STREAM, e.g. local.events",
    }
    for argv, message in cases.items():
        assert one_line_error(job.sampan(*argv), "streams") == message
    produce = ("streams", "produce", "local.words", "--job", "{job}")
    assert one_line_error(job.sampan(*produce, stdin='{"key": "a", "value": {}}\nnope\n'),
                          "streams") == (
        'stdin line 2: not JSON (Expecting value: line 1 column 1 (char 0)); write one object '
        'per line like {"key": "k", "value": {...}}')
    assert one_line_error(job.sampan(*produce, stdin="[1]\n"), "streams") == (
        'stdin line 1: got a JSON list; write one object per line like '
        '{"key": "k", "value": {...}}')
    assert one_line_error(job.sampan("run", str(job.folder / "nope.toml")), "run") == (
        f"{job.folder / 'nope.toml'}: job file not found; pass the path of the job's .toml file")


async def test_produce_list_and_tail_round_trip(make_job: Callable[..., CountJob]) -> None:
    job = make_job("roundtrip", {"words": 2})
    assert job.sampan("streams", "create", "local.words", "--partitions", "2",
                      "--job", "{job}").returncode == 0
    lines = "".join(json.dumps({"key": k, "value": {"seq": 1}}) + "\n" for k in keys(4))
    produced = job.sampan("streams", "produce", "local.words", "--job", "{job}", stdin=lines)
    assert (produced.returncode, produced.stderr) == (0, "produced 4 records to local.words\n")
    listed = job.sampan("streams", "list", "--job", "{job}")
    spans = await job.call(lambda s: s.offsets("words"))
    newest = ",".join(str(spans[p].end - 1) if spans[p].end else "-" for p in (0, 1))
    size = sum((await job.call(lambda s: s.partition_bytes("words"))).values())
    assert listed.stdout == (
        "STREAM\tPARTITIONS\tOLDEST\tNEWEST\tBYTES\tRETENTION\n"
        f"local.words\t2\t0,0\t{newest}\t{size}\tforever\n")
    tail = job.sampan("streams", "tail", "local.words", "--job", "{job}", "--from-beginning",
                      "--until-end", "--json")
    rows = sorted((r["key"], r["partition"], r["offset"], r["value"]["seq"])
                  for r in map(json.loads, tail.stdout.splitlines()))
    assert [(k, seq) for k, _, _, seq in rows] == [(k, 1) for k in keys(4)]
    assert sorted((p, o) for _, p, o, _ in rows) == sorted(
        (p, o) for p in (0, 1) for o in range(sum(1 for _, q, _, _ in rows if q == p)))


async def test_expand_refuses_what_the_coordinator_would_refuse(
        make_job: Callable[..., CountJob]) -> None:
    """4 tasks: `streams expand` to 6 exits 2 naming the remedy; --force expands anyway."""
    job = make_job("cliexpand", {"words": 4})
    await job.create("words", 4)
    job.start()
    await job.wait_epoch(1)
    argv = ("streams", "expand", "local.words", "--partitions", "6", "--job", "{job}")
    assert one_line_error(job.sampan(*argv), "streams") == (
        "refused: expanding local.words from 4 to 6 partitions would be refused by the job (4 "
        "tasks consume it): partition count 6 is not a multiple of 4: keys would change tasks; "
        "expand to a multiple of 4 (e.g. 8), or re-key the job's state offline to a task count "
        "that divides 6; pass --force to expand anyway (the running job would refuse it and "
        "keep its current job model)")
    ok = job.sampan("streams", "expand", "local.words", "--partitions", "8", "--job", "{job}")
    assert (ok.returncode, ok.stdout) == (0, "expanded local.words from 4 to 8 partitions\n")
    await job.wait_epoch(2)
    assert await job.stop() == 0


async def test_crash_loop_stops_the_job_naming_the_worker_log(
        make_job: Callable[..., CountJob]) -> None:
    """A task that always raises: restarts with backoff, then `sampan run` exits 2."""
    job = make_job("crashing", {"words": 2}, task="BoomTask", max_restarts=2, workers=1)
    await job.create("words", 2)
    await job.produce("words", keys(4), 1)
    process = job.start()

    async def exited() -> bool:
        return process.poll() is not None
    job.process = None  # the exit is what we wait for
    await job.wait(exited, "sampan run to give up")
    job.process = process
    assert process.returncode == 2
    log = job.coordinator_log()
    worker_log = job.logs / "worker-0.log"
    last = log.splitlines()[-1]
    assert re.fullmatch(
        r"sampan run: error: worker 0 exited 3 times within 10 min \(last status 2\): task "
        r"'Partition (\d)' failed on local\.words\[\1\] offset 0: RuntimeError: boom on "
        r"k00\d \(count_task\.py:23 in process\); .*", last), last
    assert last.endswith(f"the worker's log is {worker_log}; fix the cause and run again")
    assert log.count("restarting worker 0") == 2
    text = worker_log.read_text()
    assert "Traceback (most recent call last)" in text
    assert "RuntimeError: boom on k00" in text
    document = json.loads(job.sampan("status", "{job}", "--json").stdout)
    assert (document["state"], document["error"]) == ("failed", log.splitlines()[-1].removeprefix(
        "sampan run: error: "))


async def test_produce_writes_nothing_when_any_line_is_bad(
        make_job: Callable[..., CountJob]) -> None:
    """All or nothing: line 3 is bad, lines 1–2 are not written; a line without "value" is
    refused (a tombstone says "value": null); one record is "1 record"."""
    job = make_job("allornothing", {"words": 2})
    await job.create("words", 2)
    produce = ("streams", "produce", "local.words", "--job", "{job}")
    lines = '{"key": "a", "value": 1}\n{"key": "b", "value": 2}\n{"key": "c", "val": 3}\n'
    assert one_line_error(job.sampan(*produce, stdin=lines), "streams") == (
        'stdin line 3: no "value" field (found [\'key\', \'val\']); write {"key": "k", '
        '"value": {...}}, or "value": null for a tombstone (a delete)')
    assert sum(r.end for r in (await job.call(lambda s: s.offsets("words"))).values()) == 0
    done = job.sampan(*produce, stdin='{"key": "a", "value": null}\n')
    assert (done.returncode, done.stderr) == (0, "produced 1 record to local.words\n")
    tail = job.sampan("streams", "tail", "local.words", "--job", "{job}", "--from-beginning",
                      "--until-end", "--json")
    assert [(r["key"], r["value"]) for r in map(json.loads, tail.stdout.splitlines())] == [
        ("a", None)]


async def test_tail_prints_plain_text_and_names_records_it_cannot_decode(
        make_job: Callable[..., CountJob]) -> None:
    """Without --json: text keys, JSON values (no Python reprs); a record the serdes cannot
    decode is named with partition and offset and shown as stored; --raw shows bytes."""
    job = make_job("tailing", {"words": 2})
    await job.create("words", 1)
    records = [ProducerRecord("words", b"k1", b'{"n": 1, "s": "x"}', partition=0),
               ProducerRecord("words", b"\xff\xfe", b'{"n": 2}', partition=0),
               ProducerRecord("words", b"k3", b"not json", partition=0)]
    await job.call(lambda s: s.produce(records))
    tail = job.sampan("streams", "tail", "local.words", "--job", "{job}", "--from-beginning",
                      "--until-end")
    assert tail.returncode == 0
    assert tail.stdout.splitlines() == [
        '0\t0\tk1\t{"n": 1, "s": "x"}',
        '0\t1\tbase64://4=\t{"n": 2}',
        "0\t2\tk3\tnot json"]
    assert [line.split(": cannot decode")[0] for line in tail.stderr.splitlines()] == [
        "local.words partition 0 offset 1", "local.words partition 0 offset 2"]
    assert "(see it with --raw)" in tail.stderr
    raw = job.sampan("streams", "tail", "local.words", "--job", "{job}", "--from-beginning",
                     "--until-end", "--raw", "--json")
    assert [json.loads(line)["key"] for line in raw.stdout.splitlines()] == [
        "k1", "base64://4=", "k3"]
    assert raw.stderr == ""
