"""`sampan streams list` (sampan's own streams hidden unless --all, marked), `streams
delete` (refused while a running job uses the stream) and the "did you mean" of a mistyped
stream name, on the real local log."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

from jobs.jobfiles import count_job_text
from jobs.outputs import keys
from jobs.runs import CountJob

from framework.commands.held import Discarded
from framework.systems.base import ProducerRecord


def one_line_error(done: subprocess.CompletedProcess[str], command: str = "streams") -> str:
    """The command failed with exit 2, nothing on stdout, one error line on stderr."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert done.stdout == "" and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"sampan {command}: error: ")
    return lines[0].removeprefix(f"sampan {command}: error: ")


async def test_list_hides_sampans_own_streams_unless_all(make_job: Callable[..., CountJob]) -> None:
    """The coordinator stream and the changelogs of any job are sampan's: left out of the
    list (a line on stderr says how many), listed and named with --all."""
    job = make_job("lister", {"words": 2})
    await job.create("words", 2)
    for stream in ("__sampan-lister-coordinator", "lister-counts-changelog",
                   "__sampan-other-coordinator", "other-totals-changelog"):
        await job.create(stream, 1)
    listed = job.sampan("streams", "list", "{job}")
    assert listed.returncode == 0, listed.stderr
    assert [line.split("\t")[0] for line in listed.stdout.splitlines()] == [
        "STREAM", "local.words"]
    assert listed.stderr == ("(4 internal streams of sampan not shown: coordinator streams, "
                             "checkpoints, fences, changelogs; --all lists them)\n")
    every = job.sampan("streams", "list", "{job}", "--all")
    assert (every.returncode, every.stderr) == (0, "")
    rows = [line.split("\t") for line in every.stdout.splitlines()]
    assert rows[0] == ["STREAM", "PARTITIONS", "OLDEST", "NEWEST", "BYTES", "RETENTION",
                       "INTERNAL"]
    assert {row[0]: row[-1] for row in rows[1:]} == {
        "local.__sampan-lister-coordinator": "coordinator stream of job 'lister'",
        "local.__sampan-other-coordinator": "coordinator stream of job 'other'",
        "local.lister-counts-changelog": "changelog of store 'counts' of job 'lister'",
        "local.other-totals-changelog": "a store's changelog",
        "local.words": "-",
    }


async def test_a_mistyped_stream_name_gets_a_did_you_mean(
        make_job: Callable[..., CountJob]) -> None:
    job = make_job("typos", {"words": 2})
    await job.create("words", 2)
    await job.create("side", 1)
    path = job.path
    cases = {
        ("streams", "tail", "local.wrods", "{job}"):
            f'stream "local.wrods" is not declared in {path}; add a [streams."local.wrods"] '
            f'table (declared: local.counts, local.words); did you mean "local.words"?',
        ("streams", "produce", "local.cuonts", "{job}"):
            f'stream "local.cuonts" is not declared in {path}; add a [streams."local.cuonts"] '
            f'table (declared: local.counts, local.words); did you mean "local.counts"?',
        ("streams", "expand", "local.sied", "--partitions", "2", "{job}"):
            f"stream local.sied does not exist; create it with `sampan streams create "
            f'local.sied --partitions N --job {path}`; did you mean "local.side"?',
        ("streams", "delete", "local.word", "--yes", "{job}"):
            f"stream local.word does not exist; create it with `sampan streams create "
            f'local.word --partitions N --job {path}`; did you mean "local.words"?',
        ("streams", "reset-offsets", "local.word", "--to", "earliest", "{job}"):
            "local.word is not an input of job 'typos' (inputs: local.words); did you mean "
            '"local.words"?',
        ("streams", "discard-held", "local.wordz", "{job}"):
            "local.wordz is not an input of job 'typos' (inputs: local.words); did you mean "
            '"local.words"?',
        ("streams", "list", "--job", "{job}"): None,
    }
    for argv, message in cases.items():
        done = job.sampan(*argv)
        if message is None:
            assert done.returncode == 0
            continue
        assert one_line_error(done) == message
    # a system name too
    assert one_line_error(job.sampan("streams", "create", "locl.words", "--partitions", "1",
                                     "{job}")) == (
        f'system "locl" is not declared in {path}; add a [systems.locl] table (declared: '
        f'local); did you mean "local"?')


async def test_delete_drops_the_stream_its_records_and_its_history(
        make_job: Callable[..., CountJob]) -> None:
    """Records, partitions and growth records go: created again, the stream starts at
    offset 0 with no growth behind it. Without --yes, and no terminal to ask on, nothing
    is deleted."""
    job = make_job("deleter", {"words": 2})
    await job.create("side", 2)
    await job.expand("side", 4)
    await job.call(lambda s: s.produce([ProducerRecord("side", k.encode(), b"1")
                                        for k in keys(10)]))
    refused = job.sampan("streams", "delete", "local.side", "{job}", stdin="y\n")
    assert one_line_error(refused) == (
        "deleting local.side (4 partitions, 10 records) cannot be undone: pass --yes to "
        "delete it (stdin is not a terminal to ask on)")
    assert "side" in await job.call(lambda s: s.list_streams())
    done = job.sampan("streams", "delete", "local.side", "{job}", "--yes")
    assert (done.returncode, done.stdout, done.stderr) == (
        0, "deleted local.side (4 partitions, 10 records)\n", "")
    assert "side" not in await job.call(lambda s: s.list_streams())
    await job.create("side", 2)
    history = await job.call(lambda s: s.growth_history("side"))
    assert (history.count, dict(history.ends), dict(history.grown)) == (2, {0: 0, 1: 0}, {})


async def test_delete_is_refused_while_a_running_job_uses_the_stream(
        make_job: Callable[..., CountJob]) -> None:
    """The job file's own running job, and another job running on the same local log
    (found through its lease and job model), keep their streams; an unused one goes at
    once. Stopped, the job lets go, and the output says what to do before it runs again."""
    job = make_job("holder", {"words": 2})
    other = job.folder / "other.toml"  # another job on the same log, not reading words
    other.write_text(count_job_text("bystander", {"side": 1}))
    await job.create("words", 2)
    await job.create("spare", 1)
    await job.produce("words", keys(6), 1)
    job.start()
    state = await job.wait_epoch(1)
    await job.wait_outputs()
    pid = state.status.coordinator_pid
    host = state.status.coordinator_host
    running = f"refused: job 'holder' is running (coordinator pid {pid} on {host}) and"
    stop = f"stop it (Ctrl-C on `sampan run {job.path}`), then delete again"
    for stream, how in (("local.words", "reads"),
                        ("local.counts", "declares (its task may write to)"),
                        ("local.holder-counts-changelog", "logs store 'counts' to"),
                        ("local.__sampan-holder-coordinator", "keeps its job models in")):
        done = job.sampan("streams", "delete", stream, "{job}", "--yes")
        assert one_line_error(done) == f"{running} {how} {stream}; {stop}"
    by_other = job.sampan("streams", "delete", "local.words", "--job", str(other), "--yes")
    assert one_line_error(by_other) == (
        f"refused: job 'holder' is running (coordinator pid {pid} on {host}) and reads "
        f"local.words; stop it (Ctrl-C on its `sampan run`, or `kill {pid}` on {host}), "
        f"then delete again")
    spare = job.sampan("streams", "delete", "local.spare", "{job}", "--yes")
    assert (spare.returncode, spare.stdout) == (
        0, "deleted local.spare (1 partition, 0 records)\n")
    assert await job.stop() == 0
    await job.assert_exact()  # the refusals took nothing from it
    done = job.sampan("streams", "delete", "local.words", "{job}", "--yes")
    assert (done.returncode, done.stdout) == (
        0, "deleted local.words (2 partitions, 6 records). Job 'holder' reads it: after you "
        "create it again, run `sampan streams reset-offsets local.words --job "
        f"{job.path} --to earliest` before `sampan run` (its checkpoints still point into "
        "the deleted stream)\n")
    assert "words" not in await job.call(lambda s: s.list_streams())
    status = json.loads(job.sampan("status", "{job}", "--json").stdout)
    assert status["stream_partition_counts"] == {}  # status still reads, without it


def test_a_discard_of_one_record_is_said_in_the_singular() -> None:
    assert Discarded("local.a", {0: (5, 6), 1: (3, 3)}, "local.a 1→3→4", 4, 1).text(
        "job.toml") == (
        "discarded 1 record of local.a (local.a 1→3→4): partition 0 offsets 5..5. The job "
        "skips them; they stay in the stream. It reads local.a at 1 partition from epoch 4 "
        "on: start it with `sampan run job.toml`")


async def test_a_partition_past_the_streams_count_is_named_with_its_count(
        make_job: Callable[..., CountJob]) -> None:
    job = make_job("counted", {"words": 1})
    await job.create("words", 1)
    done = job.sampan("streams", "produce", "local.words", "{job}", "--value-hex", "00",
                      "--partition", "1")
    assert one_line_error(done) == (
        "partition 1 of stream 'words' does not exist in system 'local' (it has 1 partition)")


def test_the_expansion_plan_counts_in_words(make_job: Callable[..., CountJob]) -> None:
    job = make_job("planned", {"words": 1})
    done = job.sampan("expansion-plan", "--partitions", "1", "2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("local.events with 1 partition → 1 task\n")
    assert "\nlocal.events with 2 partitions → 1 task\n" in done.stdout
