"""Damaged files under a running job: a RocksDB store heals from its changelog through
`sampan run`'s own restart; a damaged local log is one line naming the file, exit 2."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from jobs.outputs import keys
from jobs.runs import CountJob


def damage_log(file: Path) -> None:
    """Everything after the first page becomes garbage (the header stays readable)."""
    connection = sqlite3.connect(file)
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page = connection.execute("PRAGMA page_size").fetchone()[0]
    connection.close()
    data = bytearray(file.read_bytes())
    for at in range(page, len(data)):
        data[at] = (at * 7) % 251
    file.write_bytes(bytes(data))


async def test_a_damaged_store_heals_through_a_worker_restart(
        make_job: Callable[..., CountJob]) -> None:
    """A checksum mismatch found while processing: the worker wipes the store and exits,
    `sampan run` restarts it, the store is restored from its changelog — exact."""
    job = make_job("healing", {"words": 2})
    await job.create("words", 2)
    await job.produce("words", keys(60), 20)
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    assert await job.stop() == 0
    folder = job.config.state_dir / "stores" / "counts" / "Partition%200"
    tables = sorted(folder.glob("*.sst"))
    assert tables, sorted(folder.iterdir())
    for table in tables:
        data = bytearray(table.read_bytes())
        for at in range(8, 40):  # the first data block: opens fine, fails when read
            data[at] ^= 0x5A
        table.write_bytes(bytes(data))
    await job.produce("words", keys(60), 5)
    job.start()
    await job.wait_outputs()
    assert await job.stop() == 0
    await job.assert_exact()
    text = (job.logs / "worker-0.log").read_text()
    assert "store 'counts' of task 'Partition 0' at" in text
    assert "is damaged (Corruption: block checksum mismatch" in text
    assert "the store is restored fully from its changelog" in text


@pytest.mark.parametrize("command", [
    ("status", "{job}"), ("run", "{job}"),
    ("streams", "tail", "local.words", "--job", "{job}", "--from-beginning", "--until-end"),
    ("streams", "produce", "local.words", "--job", "{job}"),
], ids=["status", "run", "tail", "produce"])
async def test_a_damaged_local_log_is_one_line_naming_the_file(
        make_job: Callable[..., CountJob], command: tuple[str, ...]) -> None:
    job = make_job("damaged", {"words": 2})
    await job.create("words", 2)
    await job.produce("words", keys(20), 20)
    file = job.folder / "data" / "log.sqlite3"
    damage_log(file)
    done = job.sampan(*command, stdin='{"key": "a", "value": 1}\n')
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    name = "streams" if command[0] == "streams" else command[0]
    assert line == (
        f"sampan {name}: error: local log {file} is damaged (database disk image is "
        f"malformed): stop every sampan process using it, then put back a backup of the "
        f"file, or move it away (`mv {file} {file}.damaged`) to start an empty log — every "
        f"stream, changelog and checkpoint of this system is in that file")
