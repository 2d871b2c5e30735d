"""Stop a background task for sure: cancel it again until it has ended.

One ``cancel()`` can be lost. Python 3.11's ``asyncio.wait_for`` returns the inner result
when it completed just as the cancel arrived, and a library's retry loop may catch the
cancel as an error; the task then goes on (a loop with a sleep goes on for good) and
whoever awaits it after a single cancel waits forever — a worker that never exits.
`cancel_and_wait` repeats the cancel every ``recancel_s`` until the task is done.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

__all__ = ["cancel_and_wait"]

log = logging.getLogger(__name__)


async def cancel_and_wait(task: asyncio.Future[Any], what: str,
                          recancel_s: float = 0.5, warn_after_s: float = 10.0) -> None:
    """Cancel ``task`` (``what`` it does, for the log) until it has ended, then consume
    its outcome: a background task's error is logged, never raised from here."""
    started = time.monotonic()
    warned = False
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=recancel_s)
        if not warned and not task.done() and time.monotonic() - started > warn_after_s:
            warned = True
            log.warning("%s still stopping after %.0f s; cancelling again", what,
                        warn_after_s)
    with contextlib.suppress(asyncio.CancelledError):
        error = task.exception()
        if error is not None:
            log.error("%s failed: %r", what, error)
