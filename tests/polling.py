"""How often the tests' wait loops poll: often at first, then at most once a second.

A condition polled every 50 ms for a minute (a `sampan status` subprocess, a checkpoint
read over a fresh client) burns a core that the job under test needs; polling at a tenth
of the time already waited keeps a quick condition quick and a long wait cheap.
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["apoll", "interval", "poll"]

FIRST_S = 0.05
LONGEST_S = 1.0


def interval(started: float) -> float:
    """Seconds to sleep before the next check of a wait that began at ``started``
    (`time.monotonic`)."""
    return min(LONGEST_S, max(FIRST_S, (time.monotonic() - started) / 10))


def poll(started: float) -> None:
    """Sleep `interval` (synchronous waits)."""
    time.sleep(interval(started))


async def apoll(started: float) -> None:
    """Sleep `interval` (asyncio waits)."""
    await asyncio.sleep(interval(started))
