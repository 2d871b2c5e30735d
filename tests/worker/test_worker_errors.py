"""A record the serdes cannot decode, under each `errors.policy`."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from jobs import harness as h
from jobs import jobfiles as jf

from framework.drill.verify import read_stream
from framework.errors import ProcessingError
from framework.systems.base import ProducerRecord, System
from groupers import SystemStreamPartition

BAD = b'{"amount": oops}'
EXPECTED_ERROR = ("cannot decode value of local.events[0] offset 2 with serde 'json'")


def _records() -> list[ProducerRecord]:
    """Five records for key "k" on partition 0; the one at offset 2 is not JSON."""
    values = [json.dumps({"amount": a, "n": n}).encode() for n, a in enumerate([1, 2], 1)]
    values += [BAD]
    values += [json.dumps({"amount": a, "n": n}).encode() for n, a in enumerate([3, 4], 3)]
    return [ProducerRecord("events", b"k", v, partition=0) for v in values]


async def _sums(meta: System) -> list[int]:
    return [json.loads(v)["sum"] for rows in (await read_stream(meta, "events-sums")).values()
            for _, v in rows]


async def test_fail_policy_stops_at_the_record_naming_ssp_and_offset(tmp_path: Path) -> None:
    """The default: the worker commits what it processed before the record (nothing of
    the record), then stops naming it."""
    config = jf.load(jf.write_job(tmp_path / "job"))
    meta = await h.open_meta(config)
    try:
        model = await h.prepare(config, meta)
        await meta.produce(_records())
        with pytest.raises(ProcessingError) as caught:
            await h.run_worker(config, model, 5)
        message = str(caught.value)
        assert message.startswith(EXPECTED_ERROR), message
        assert "errors.policy is 'fail'" in message
        assert await _sums(meta) == [1, 3]
        checkpoint = (await meta.read_checkpoints(config.name))["Partition 0"]
        assert checkpoint.inputs[SystemStreamPartition("local", "events", 0)] == 2
    finally:
        await meta.close()


async def test_fail_policy_names_the_remedies_and_its_reset_skips_only_the_record(
        tmp_path: Path) -> None:
    """The message names both remedies, the reset with its exact command line; that
    command, run as printed, moves the job past the record and nothing else: every other
    record is summed once, in order."""
    path = jf.write_job(tmp_path / "job")
    config = jf.load(path)
    meta = await h.open_meta(config)
    try:
        model = await h.prepare(config, meta)
        await meta.produce(_records())
        with pytest.raises(ProcessingError) as caught:
            await h.run_worker(config, model, 5)
        message = str(caught.value)
        command = (f"sampan streams reset-offsets local.events --job {path} --partition 0 "
                   f"--to-offset 3")
        assert message.endswith(
            "; errors.policy is 'fail', so the job stops at it. To move past it, set [errors] "
            'policy = "skip" or "dead-letter" (for every record that cannot be decoded), or '
            f"skip this one record: stop the job, run `{command}` and start it again. Then "
            "fix the producer that wrote it"), message
        done = subprocess.run(
            [sys.executable, "-m", "framework.cli", *command.split()[1:]], capture_output=True,
            text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(h.REPO)})
        assert (done.returncode, done.stderr) == (0, "")
        assert done.stdout.splitlines()[0] == "Partition 0: local.events[0] 2 → 3"
        _, result = await h.run_worker(config, model, 2)
        assert (result.processed, result.skipped) == (2, 0)
        assert await _sums(meta) == [1, 3, 6, 10]
    finally:
        await meta.close()


async def test_fail_policy_exits_the_worker_process_with_one_line(tmp_path: Path) -> None:
    """`sampan worker` prints the cause and the fix on one stderr line and exits 2."""
    path = jf.write_job(tmp_path / "job")
    config = jf.load(path)
    meta = await h.open_meta(config)
    try:
        await h.prepare(config, meta)
        await meta.produce(_records())
        with (tmp_path / "worker.log").open("ab") as log:
            worker = h.start_worker(path, log)
            try:
                async def exited() -> bool:
                    return worker.poll() is not None

                await h.wait_until(exited, 30, "the worker to stop on the bad record")
            finally:
                h.kill(worker)
        assert worker.returncode == 2
        lines = [line for line in (tmp_path / "worker.log").read_text().splitlines()
                 if line.startswith("sampan worker: error:")]
        assert len(lines) == 1
        assert lines[0].startswith(f"sampan worker: error: {EXPECTED_ERROR}")
        assert 'set [errors] policy = "skip" or "dead-letter"' in lines[0]
    finally:
        await meta.close()


async def test_skip_policy_counts_the_bad_record_and_moves_on(tmp_path: Path) -> None:
    config = jf.load(jf.write_job(tmp_path / "job", errors='\n[errors]\npolicy = "skip"\n'))
    meta = await h.open_meta(config)
    try:
        model = await h.prepare(config, meta)
        await meta.produce(_records())
        _, result = await h.run_worker(config, model, 5)
        assert (result.processed, result.skipped) == (4, 1)
        assert await _sums(meta) == [1, 3, 6, 10]
        checkpoint = (await meta.read_checkpoints(config.name))["Partition 0"]
        assert checkpoint.inputs[SystemStreamPartition("local", "events", 0)] == 5
    finally:
        await meta.close()


async def test_dead_letter_policy_writes_the_raw_record_and_the_error(tmp_path: Path) -> None:
    config = jf.load(jf.write_job(tmp_path / "job", errors=(
        '\n[errors]\npolicy = "dead-letter"\ndead_letter_stream = "local.dead-letters"\n')))
    meta = await h.open_meta(config)
    try:
        model = await h.prepare(config, meta)
        await meta.produce(_records())
        _, result = await h.run_worker(config, model, 5)
        assert (result.processed, result.skipped) == (4, 1)
        assert await _sums(meta) == [1, 3, 6, 10]
        [(key, value)] = (await read_stream(meta, "dead-letters"))[0]
        letter = json.loads(value)
        assert key == b"k"
        assert letter["error"].startswith(EXPECTED_ERROR)
        del letter["error"], letter["timestamp"]
        assert letter == {"kind": "decode", "system": "local", "stream": "events", "partition": 0,
                          "offset": 2,
                          "key_base64": base64.b64encode(b"k").decode(),
                          "value_base64": base64.b64encode(BAD).decode()}
    finally:
        await meta.close()


async def test_dead_letters_read_back_with_the_dead_letter_streams_serdes(
        tmp_path: Path) -> None:
    """A bad record whose key is not UTF-8 (the dead-letter stream's key serde is string):
    `sampan streams tail` of the dead letters decodes every one, nothing on stderr."""
    path = jf.write_job(tmp_path / "job", errors=(
        '\n[errors]\npolicy = "dead-letter"\ndead_letter_stream = "local.dead-letters"\n'))
    config = jf.load(path)
    meta = await h.open_meta(config)
    try:
        model = await h.prepare(config, meta)
        await meta.produce([ProducerRecord("events", b"\xff\xfe", BAD, partition=0),
                            ProducerRecord("events", b"k", BAD, partition=0)])
        _, result = await h.run_worker(config, model, 2)
        assert result.skipped == 2
    finally:
        await meta.close()
    done = subprocess.run(
        [sys.executable, "-m", "framework.cli", "streams", "tail", "local.dead-letters",
         "--job", str(path), "--from-beginning", "--until-end", "--json"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(h.REPO)})
    assert (done.returncode, done.stderr) == (0, "")
    letters = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(row["key"], row["value"]["key_base64"], row["value"]["offset"]) for row in letters
            ] == [("base64://4=", "//4=", 0), ("k", "aw==", 1)]


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "framework.cli", *args], input=stdin,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(h.REPO)})


GARBAGE = bytes.fromhex("7b6f6f70ff")  # '{oop' and a byte that is not UTF-8


@pytest.mark.parametrize("policy", ["skip", "dead-letter", "fail"])
async def test_raw_bytes_produced_by_the_cli_meet_the_decode_policy(
        tmp_path: Path, policy: str) -> None:
    """`streams produce --value-hex` writes bytes the stream's json serde refuses, between
    two good records: each policy does what it says with them."""
    errors = f'\n[errors]\npolicy = "{policy}"\n' + (
        'dead_letter_stream = "local.dead-letters"\n' if policy == "dead-letter" else "")
    path = jf.write_job(tmp_path / "job", errors=errors)
    config = jf.load(path)
    meta = await h.open_meta(config)
    try:
        model = await h.prepare(config, meta)
        good = '{"key": "k", "value": {"amount": %d, "n": %d}, "partition": 0}\n'
        for args, stdin in ((("--job", str(path)), good % (1, 1)),
                            (("--job", str(path), "--key-hex", "6b", "--value-hex",
                              GARBAGE.hex(), "--partition", "0"), None),
                            (("--job", str(path)), good % (2, 2))):
            done = _cli("streams", "produce", "local.events", *args, stdin=stdin)
            assert (done.returncode, done.stderr) == (0, "produced 1 record to local.events\n")
        if policy == "fail":
            with pytest.raises(ProcessingError) as caught:
                await h.run_worker(config, model, 3)
            assert str(caught.value).startswith(
                "cannot decode value of local.events[0] offset 1 with serde 'json'")
            assert await _sums(meta) == [1]
            return
        _, result = await h.run_worker(config, model, 3)
        assert (result.processed, result.skipped) == (2, 1)
        assert await _sums(meta) == [1, 3]
        letters = (await read_stream(meta, "dead-letters")).get(0, [])
        if policy == "skip":
            assert letters == []
        else:
            [(key, value)] = letters
            letter = json.loads(value)
            assert (key, letter["offset"], letter["value_base64"]) == (
                b"k", 1, base64.b64encode(GARBAGE).decode())
    finally:
        await meta.close()


async def test_raw_lines_are_written_as_their_bytes(tmp_path: Path) -> None:
    """`streams produce --raw`: one record per stdin line, its bytes as they are (no serde),
    the key from --key-hex, in order on the partition asked for."""
    path = jf.write_job(tmp_path / "job")
    config = jf.load(path)
    meta = await h.open_meta(config)
    try:
        await h.prepare(config, meta)
        done = _cli("streams", "produce", "local.events", "--job", str(path), "--raw",
                    "--key-hex", "00ff", "--partition", "3", stdin="not json\n{\"a\": 1}\n\n")
        assert (done.returncode, done.stderr) == (0, "produced 3 records to local.events\n")
        assert (await read_stream(meta, "events")).get(3) == [
            (b"\x00\xff", b"not json"), (b"\x00\xff", b'{"a": 1}'), (b"\x00\xff", b"")]
    finally:
        await meta.close()
