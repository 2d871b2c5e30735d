"""Freeze a process of a local-log job (SIGSTOP) at a moment it holds no write lock.

A process stopped inside a write transaction keeps the database locked for as long as it
is frozen: every other process of the job — and the test's own writes — then wait out
``busy_timeout_ms`` and fail. Tests that freeze a worker to make a race happen mean the
process frozen, not the whole log, so `freeze` stops it, checks that a write could begin,
and otherwise lets it run a moment and tries again.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from contextlib import closing
from pathlib import Path

__all__ = ["freeze"]


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] in ("T", "t")


def freeze(pid: int, database: Path, timeout: float = 30) -> None:
    """SIGSTOP ``pid`` at a moment it holds no write lock on ``database`` (a local log's
    ``log.sqlite3``); the caller sends SIGCONT."""
    deadline = time.monotonic() + timeout
    while True:
        os.kill(pid, signal.SIGSTOP)
        while not _stopped(pid):
            time.sleep(0.001)
        try:
            with closing(sqlite3.connect(database, timeout=0.05, isolation_level=None)) as db:
                db.execute("BEGIN IMMEDIATE")
                db.execute("ROLLBACK")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) and "busy" not in str(error):
                raise
        os.kill(pid, signal.SIGCONT)
        assert time.monotonic() < deadline, (
            f"pid {pid} held {database} locked at every try for {timeout} s")
        time.sleep(0.01)
