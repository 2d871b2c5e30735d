"""`cancel_and_wait` ends a background task that swallowed a cancel (the lost-cancel race
of Python 3.11's ``asyncio.wait_for``), and logs rather than raises its error."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from framework.cancel import cancel_and_wait


async def test_a_task_that_swallows_cancels_still_ends() -> None:
    swallowed = 0

    async def stubborn() -> None:
        nonlocal swallowed
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                swallowed += 1
                if swallowed == 3:
                    raise
                asyncio.current_task().uncancel()  # type: ignore[union-attr]

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    await asyncio.wait_for(cancel_and_wait(task, "stubborn", recancel_s=0.01), 10)
    assert task.cancelled() and swallowed == 3


async def test_a_single_cancel_would_hang_on_it() -> None:
    """The failure `cancel_and_wait` exists for: one cancel, then an await, never ends."""
    async def swallow_once() -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(3600)
        await asyncio.sleep(3600)

    task = asyncio.create_task(swallow_once())
    await asyncio.sleep(0)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=0.2)
    assert not done
    await cancel_and_wait(task, "swallow once", recancel_s=0.01)
    assert task.done()


async def test_an_error_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    async def broken() -> None:
        raise RuntimeError("disk on fire")

    task = asyncio.create_task(broken())
    await asyncio.sleep(0)
    with caplog.at_level(logging.ERROR, logger="framework.cancel"):
        await cancel_and_wait(task, "the broken watcher")
    assert "the broken watcher failed: RuntimeError('disk on fire')" in caplog.text


async def test_a_finished_task_returns_at_once() -> None:
    task = asyncio.create_task(asyncio.sleep(0, result=7))
    await task
    await cancel_and_wait(task, "done already")
    assert task.result() == 7
